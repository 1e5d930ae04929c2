"""Validation by measurement: every ordered pair's configured link against what ping measures (pure + a PNG).

For each pair: configured RTT, jitter and loss from the map; measured median and p95 RTT, the standard deviation
of the RTT, and the loss, from per-echo times (`ping` without `-q`). A pair passes when its median RTT is within
max(tolerance_ms, tolerance_pct x RTT) of the configured RTT and its loss is within what chance allows: the
configured round-trip loss 1-(1-p)^2 plus 3 binomial standard deviations plus one echo. The jitter is reported
beside the value it should have (each direction uniform in ±jitter, so the RTT's standard deviation is
jitter x sqrt(2/3)) but not judged: a few pings cannot pin a standard deviation down. A pair that the map holds
down at the measured time (a partition, a flap's down phase: docs/events.md) is expected unreachable: it passes
when no echo came back, and fails when one did.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gesscale.latency_map import LatencyMap

_TIME = re.compile(r"icmp_seq=(\d+) .*?time=([\d.]+) ms")
_SENT = re.compile(r"(\d+) packets transmitted")


def ping_times_command(address: str, count: int, interval_s: float = 0.2, source: str | None = None) -> str:
    """A ping that prints each echo's RTT; `source` binds the sending address (local hosts share the machine)."""
    src = f" -I {source}" if source else ""
    return f"ping -n -c {count} -i {interval_s:g} -W 2{src} {address}"


def parse_ping_times(output: str) -> tuple[int, list[float]]:
    """(echoes sent, RTT of each reply in ms) from ping output; duplicates counted once."""
    sent = _SENT.search(output)
    seen: dict[int, float] = {}
    for m in _TIME.finditer(output):
        seen.setdefault(int(m.group(1)), float(m.group(2)))
    return (int(sent.group(1)) if sent else 0), list(seen.values())


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass(frozen=True)
class PairCheck:
    """One ordered pair, configured against measured, and whether it passes."""

    src: str
    dst: str
    rtt_ms: float
    jitter_ms: float
    loss_pct: float
    sent: int
    received: int
    median_ms: float | None
    p95_ms: float | None
    stdev_ms: float | None
    allowed_ms: float
    rtt_ok: bool
    loss_ok: bool
    down: bool = False

    @property
    def measured_loss_pct(self) -> float:
        """Echoes without a reply, in %."""
        return 100.0 * (self.sent - self.received) / self.sent if self.sent else 100.0

    @property
    def expected_stdev_ms(self) -> float:
        """The RTT standard deviation the configured jitter gives (two uniform ±jitter draws)."""
        return self.jitter_ms * math.sqrt(2.0 / 3.0)

    @property
    def ok(self) -> bool:
        """RTT and loss both within tolerance."""
        return self.rtt_ok and self.loss_ok

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the derived values."""
        return {**asdict(self), "measured_loss_pct": round(self.measured_loss_pct, 3),
                "expected_stdev_ms": round(self.expected_stdev_ms, 3), "ok": self.ok}  # fmt: skip


def check_pair(src: str, dst: str, lmap: LatencyMap, sent: int, times: list[float], tolerance_ms: float,
               tolerance_pct: float, down: bool = False) -> PairCheck:  # fmt: skip
    """Judge one pair's ping against the map's link; a `down` pair (partitioned) against no reply at all."""
    link = lmap.link(src, dst)
    allowed = max(tolerance_ms, tolerance_pct / 100.0 * link.rtt_ms)
    median = statistics.median(times) if times else None
    p95 = _p95(times) if times else None
    stdev = statistics.pstdev(times) if len(times) > 1 else None
    if down:
        rtt_ok = loss_ok = sent > 0 and not times
    else:
        rtt_ok = median is not None and abs(median - link.rtt_ms) <= allowed
        p = 1.0 - (1.0 - link.loss_pct / 100.0) ** 2
        lost = sent - len(times)
        loss_ok = sent > 0 and lost <= p * sent + 3.0 * math.sqrt(sent * p * (1 - p)) + 1.0
    return PairCheck(src, dst, link.rtt_ms, link.jitter_ms, link.loss_pct, sent, len(times), median, p95, stdev,
                     allowed, rtt_ok, loss_ok, down)  # fmt: skip


@dataclass(frozen=True)
class Validation:
    """Every pair's check, the tolerance they were held to, and the engine that produced the network."""

    pairs: tuple[PairCheck, ...]
    tolerance_ms: float
    tolerance_pct: float
    engine: str

    @property
    def ok(self) -> bool:
        """Every pair passes."""
        return all(p.ok for p in self.pairs)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report."""
        return {"engine": self.engine, "ok": self.ok,
                "tolerance": {"rtt_ms": self.tolerance_ms, "rtt_pct": self.tolerance_pct,
                              "rule": "|median - rtt| <= max(rtt_ms, rtt_pct% of rtt); loss within "
                                      "round-trip loss + 3 binomial sd + 1 echo; a pair down (partition, flap) "
                                      "passes with no reply"},
                "pairs": [p.to_dict() for p in self.pairs]}  # fmt: skip


def validate(lmap: LatencyMap, pings: Mapping[tuple[str, str], tuple[int, list[float]]], engine: str,
             tolerance_ms: float = 2.0, tolerance_pct: float = 10.0,
             down: set[frozenset[str]] | None = None) -> Validation:  # fmt: skip
    """Checks of every measured pair, in map order; the pairs in `down` are expected unreachable."""
    order = {n: i for i, n in enumerate(lmap.names)}
    cut = down or set()
    pairs = tuple(check_pair(a, b, lmap, *pings[(a, b)], tolerance_ms, tolerance_pct, frozenset((a, b)) in cut)
                  for a, b in sorted(pings, key=lambda k: (order[k[0]], order[k[1]])))  # fmt: skip
    return Validation(pairs, tolerance_ms, tolerance_pct, engine)


def format_validation(v: Validation) -> str:
    """Plain text: one line per pair, then the verdict."""
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    lines = [f"{'src':<10} {'dst':<10} {'rtt':>7} {'median':>8} {'p95':>8} {'sd':>6} {'sd exp':>6} "
             f"{'loss':>6} {'lost':>6}  ok"]  # fmt: skip
    for p in v.pairs:
        rtt = "down" if p.down else f"{p.rtt_ms:.2f}"
        loss = "100.0%" if p.down else f"{p.loss_pct:.1f}%"
        verdict = ("yes" if p.ok else "NO") + (" (down as configured)" if p.down and p.ok else
                                               " (down, but replies came)" if p.down else "")  # fmt: skip
        lines.append(f"{p.src:<10} {p.dst:<10} {rtt:>7} {f(p.median_ms):>8} {f(p.p95_ms):>8} "
                     f"{f(p.stdev_ms):>6} {p.expected_stdev_ms:>6.2f} {loss:>6} "
                     f"{p.measured_loss_pct:>5.1f}%  {verdict}")  # fmt: skip
    bad = sum(not p.ok for p in v.pairs)
    word = "PASS" if v.ok else f"FAIL ({bad} of {len(v.pairs)} pairs outside)"
    lines.append(f"verdict ({v.engine} engine): {word}, tolerance max({v.tolerance_ms:g} ms, {v.tolerance_pct:g}%)")
    return "\n".join(lines)


def plot_validation(v: Validation, path: str | Path) -> None:
    """Configured vs measured RTT, one point per pair (median, p95 as an error bar), the tolerance band shaded."""
    from gesscale.figures import ROLE, pyplot, save

    plt = pyplot()  # the shared style; written as PNG (300 dpi), SVG and PDF
    fig, ax = plt.subplots(figsize=(5.5, 5))
    done = [p for p in v.pairs if p.median_ms is not None]
    top = max([p.rtt_ms for p in v.pairs] + [p.p95_ms or 0 for p in done] + [1.0]) * 1.1
    xs = [0.0, top]
    ax.fill_between(xs, [max(0, x - max(v.tolerance_ms, v.tolerance_pct / 100 * x)) for x in xs],
                    [x + max(v.tolerance_ms, v.tolerance_pct / 100 * x) for x in xs], color="0.9", label="tolerance")
    ax.plot(xs, xs, color="0.5", lw=1, label="measured = configured")
    for ok in (True, False):
        sel = [p for p in done if p.ok == ok]
        if sel:
            ax.errorbar([p.rtt_ms for p in sel], [p.median_ms for p in sel],
                        yerr=[[0] * len(sel), [(p.p95_ms or 0) - (p.median_ms or 0) for p in sel]],
                        fmt="o" if ok else "x", color=ROLE["input"] if ok else ROLE["fail"], capsize=3,
                        label="pass (median, p95)" if ok else "fail")  # fmt: skip
    ax.set_xlabel("configured RTT (ms)")
    ax.set_ylabel("measured RTT (ms)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_title(f"{v.engine} engine: {sum(p.ok for p in v.pairs)}/{len(v.pairs)} pairs pass")
    ax.legend(loc="upper left")
    fig.tight_layout()
    save(fig, path)
