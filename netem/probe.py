"""Does a host's kernel have netem? Asked on the host itself, without touching its interfaces.

The probe adds a netem qdisc to the loopback of a fresh, throwaway network namespace (`unshare -n`), which
also lets the kernel auto-load `sch_netem`; nothing of the host's own network changes.
"""

from __future__ import annotations

from dataclasses import dataclass

PROBE_COMMAND = "unshare -n tc qdisc add dev lo root netem delay 1ms"


@dataclass(frozen=True)
class NetemSupport:
    """Whether netem works on `host`, and the kernel's words when it does not."""

    host: str
    netem: bool
    detail: str = ""


def interpret_probe(host: str, exit_code: int, output: str) -> NetemSupport:
    """Turn the probe's exit status and output into a result with a one-line reason."""
    if exit_code == 0:
        return NetemSupport(host, True)
    text = " ".join(output.split())
    if "unknown" in text.lower() and "qdisc" in text.lower():
        reason = "kernel has no sch_netem (tc: qdisc kind unknown)"
    elif "not found" in text.lower():
        reason = f"a probe tool is missing: {text}"
    else:
        reason = text or f"probe exited with status {exit_code}"
    return NetemSupport(host, False, reason)


def missing_netem_message(results: list[NetemSupport]) -> str:
    """A user-facing sentence naming each host without netem and why, with the way forward."""
    bad = [r for r in results if not r.netem]
    listing = "; ".join(f"{r.host}: {r.detail}" for r in bad)
    return (
        f"netem is missing on {len(bad)} of {len(results)} host(s) — {listing}. Install a kernel with "
        "sch_netem (Raspberry Pi OS ships it), or use --mode structural to build the htb/u32 tree without delays"
    )
