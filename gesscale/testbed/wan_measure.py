"""What the testbed's network really does: ping every emulated link from inside its source's group, and judge.

A link A -> B is measured the way its traffic is delayed: `ping` runs in A's network group (fog node) or in the
root group (the site) towards B's address (127.0.0.1 for the site), so its echo requests take exactly the rules
that A's connections to B take. The verdict per link: the median RTT within `tolerance_ms` + `tolerance_pct` of
the configured RTT (defaults 1 ms + 5%: the delay daemon's own scheduling on a busy 2-core machine, see
docs/wan-emulation.md), and loss within 3 percentage points (with 20 echoes, one lost echo is 5%) of the
configured loss.
"""

from __future__ import annotations

import re
import statistics
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_TIME = re.compile(r"time[=<]([\d.]+) ms")
SITE_ADDRESS = "127.0.0.1"


def ping_times(output: str) -> list[float]:
    """Per-echo RTTs (ms) from iputils ping output, in arrival order."""
    return [float(m.group(1)) for m in _TIME.finditer(output)]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks."""
    data = sorted(values)
    if not data:
        raise ValueError("no values")
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass(frozen=True)
class LinkMeasure:
    """One link, configured against measured (RTT median/p95 and jitter in ms, loss in %), and the verdict."""

    src: str
    dst: str
    configured_ms: float
    configured_loss_pct: float
    sent: int
    received: int
    median_ms: float | None
    p95_ms: float | None
    jitter_ms: float | None  # mean absolute difference of consecutive RTTs (RFC 3550's idea, unsmoothed)
    loss_pct: float
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


def judge_link(src: str, dst: str, configured_ms: float, configured_loss_pct: float, sent: int,
               times: Sequence[float], tolerance_ms: float = 1.0, tolerance_pct: float = 5.0) -> LinkMeasure:
    """The verdict on one link from its echo RTTs (see the module docstring)."""
    received = len(times)
    loss = 100.0 * (sent - received) / sent if sent else 100.0
    if not times:
        return LinkMeasure(src, dst, configured_ms, configured_loss_pct, sent, 0, None, None, None, loss, False)
    median = statistics.median(times)
    jitter = statistics.fmean(abs(b - a) for a, b in zip(times, times[1:], strict=False)) if received > 1 else 0.0
    allowed = tolerance_ms + configured_ms * tolerance_pct / 100.0
    ok = abs(median - configured_ms) <= allowed and abs(loss - configured_loss_pct) <= 3.0 + configured_loss_pct
    return LinkMeasure(src, dst, configured_ms, configured_loss_pct, sent, received, round(median, 3),
                       round(percentile(times, 95), 3), round(jitter, 3), round(loss, 2), ok)


def _ping_in_group(procs: Path | None, address: str, count: int, interval_s: float) -> str:
    ping = ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-W", "2", address]
    argv = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(procs), *ping] if procs is not None else ping
    res = subprocess.run(argv, capture_output=True, text=True, timeout=count * interval_s + 30)
    return res.stdout


def measure_links(links: Sequence[Mapping[str, Any]], hosts: Mapping[str, str], groups: Path, site: str,
                  count: int = 20, interval_s: float = 0.05, parallel: int = 8) -> list[LinkMeasure]:
    """Ping every link (`src`, `dst`, `rtt_ms`, `loss_pct`) from its source's group; a few links at a time."""
    def one(link: Mapping[str, Any]) -> LinkMeasure:
        src, dst = str(link["src"]), str(link["dst"])
        procs = None if src == site and src not in hosts else groups / src / "cgroup.procs"
        address = SITE_ADDRESS if dst == site and dst not in hosts else hosts[dst]
        out = _ping_in_group(procs, address, count, interval_s)
        return judge_link(src, dst, float(link["rtt_ms"]), float(link.get("loss_pct", 0.0)), count, ping_times(out))

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return list(pool.map(one, links))


def plot_links(measures: Sequence[LinkMeasure], path: Path, title: str) -> Path:
    """Configured against measured RTT, one point per link (median; the bar reaches the p95), failures in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    top = max([m.configured_ms for m in measures] + [m.p95_ms or 0.0 for m in measures] + [1.0]) * 1.08
    ax.plot([0, top], [0, top], color="0.6", lw=1, label="measured = configured")
    for ok, colour, label in ((True, "tab:blue", "within tolerance"), (False, "tab:red", "outside tolerance")):
        pts = [m for m in measures if m.ok is ok and m.median_ms is not None]
        if pts:
            ax.errorbar([m.configured_ms for m in pts], [m.median_ms for m in pts],
                        yerr=[[0.0] * len(pts), [(m.p95_ms or 0.0) - (m.median_ms or 0.0) for m in pts]],
                        fmt="o", ms=4, color=colour, capsize=2, label=f"{label} ({len(pts)})")
    ax.set(xlim=(0, top), ylim=(0, top), xlabel="configured RTT (ms)", ylabel="measured RTT, median to p95 (ms)",
           title=title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
