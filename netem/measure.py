"""Reading what the network achieved: ping statistics, htb class counters, and the verdict against the map.

Pure functions over command output, so the same parsing serves the fabric path, the Ansible `measure.yml`
playbook (through its filter plugin) and the tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gesscale.latency_map import LatencyMap

_RTT = re.compile(r"=\s*([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+)\s*ms")
_RECEIVED = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_CLASS = re.compile(r"^class htb (\S+) .*?\n\s*Sent (\d+) bytes (\d+) pkt", re.MULTILINE)
_ROUTE_DEV = re.compile(r"\bdev\s+(\S+)")


def ping_command(address: str, count: int, interval_s: float = 0.2) -> str:
    """The ping that measures one pair: `count` echoes, quiet summary, 2 s wait per reply."""
    return f"ping -n -q -c {count} -i {interval_s:g} -W 2 {address}"


@dataclass(frozen=True)
class PingStats:
    """Summary of one ping run: sent/received and RTT min/avg/max/mdev in ms (None if nothing came back)."""

    sent: int
    received: int
    rtt_min: float | None = None
    rtt_avg: float | None = None
    rtt_max: float | None = None
    rtt_mdev: float | None = None


def parse_ping(output: str) -> PingStats | None:
    """Parse iputils/busybox ping summary output; None if it holds no summary at all."""
    got = _RECEIVED.search(output)
    if not got:
        return None
    sent, received = int(got.group(1)), int(got.group(2))
    rtt = _RTT.search(output)
    if not rtt:
        return PingStats(sent, received)
    mn, avg, mx, mdev = (float(x) for x in rtt.groups())
    return PingStats(sent, received, mn, avg, mx, mdev)


def parse_class_packets(tc_output: str) -> dict[str, int]:
    """Packets sent per htb class from `tc -s class show dev DEV` output: {classid: packets}."""
    return {m.group(1): int(m.group(3)) for m in _CLASS.finditer(tc_output)}


def parse_route_device(output: str) -> str | None:
    """The interface in `ip -o route get ADDR` output (the device that carries traffic to ADDR)."""
    m = _ROUTE_DEV.search(output)
    return m.group(1) if m else None


@dataclass(frozen=True)
class PairResult:
    """One ordered pair: requested RTT from the map, achieved RTT (None = no reply), and the error."""

    src: str
    dst: str
    requested_ms: float
    achieved_ms: float | None
    loss_pct: float

    @property
    def error_ms(self) -> float | None:
        """Achieved minus requested, in ms."""
        return None if self.achieved_ms is None else self.achieved_ms - self.requested_ms


@dataclass(frozen=True)
class Verdict:
    """All pairs and whether each lies within tolerance: |error| ≤ max(tolerance_ms, tolerance_pct·requested)."""

    pairs: tuple[PairResult, ...]
    tolerance_ms: float
    tolerance_pct: float

    def allowed_ms(self, pair: PairResult) -> float:
        """Largest error accepted for this pair."""
        return max(self.tolerance_ms, self.tolerance_pct / 100.0 * pair.requested_ms)

    def within(self, pair: PairResult) -> bool:
        """Whether the pair answered and its error is within tolerance."""
        return pair.error_ms is not None and abs(pair.error_ms) <= self.allowed_ms(pair)

    @property
    def ok(self) -> bool:
        """True when every pair is within tolerance."""
        return all(self.within(p) for p in self.pairs)

    def matrix(self, names: list[str]) -> dict[str, dict[str, float | None]]:
        """Achieved RTT matrix {src: {dst: ms}} (diagonal omitted)."""
        out: dict[str, dict[str, float | None]] = {n: {} for n in names}
        for p in self.pairs:
            out[p.src][p.dst] = p.achieved_ms
        return out


def judge(
    lmap: LatencyMap,
    stats: Mapping[tuple[str, str], PingStats | None],
    tolerance_ms: float = 2.0,
    tolerance_pct: float = 10.0,
) -> Verdict:
    """Compare the measured average RTT of every ordered pair with the map."""
    order = {n: i for i, n in enumerate(lmap.names)}
    pairs = []
    for (src, dst), st in sorted(stats.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])):
        achieved = None if st is None else st.rtt_avg
        loss = 100.0 if st is None or st.sent == 0 else 100.0 * (st.sent - st.received) / st.sent
        pairs.append(PairResult(src, dst, lmap.rtt(src, dst), achieved, loss))
    return Verdict(tuple(pairs), tolerance_ms, tolerance_pct)


def format_verdict(verdict: Verdict) -> str:
    """Plain-text report: one line per pair, then the overall verdict."""
    lines = [f"{'src':<10} {'dst':<10} {'requested':>10} {'achieved':>10} {'error':>9} {'loss':>6}  ok"]
    for p in verdict.pairs:
        ach = "-" if p.achieved_ms is None else f"{p.achieved_ms:.3f}"
        err = "-" if p.error_ms is None else f"{p.error_ms:+.3f}"
        mark = "yes" if verdict.within(p) else "NO"
        lines.append(f"{p.src:<10} {p.dst:<10} {p.requested_ms:>10.3f} {ach:>10} {err:>9} {p.loss_pct:>5.0f}%  {mark}")
    bad = sum(not verdict.within(p) for p in verdict.pairs)
    tol = f"tolerance max({verdict.tolerance_ms:g} ms, {verdict.tolerance_pct:g}%)"
    word = "PASS" if verdict.ok else f"FAIL ({bad} of {len(verdict.pairs)} pairs outside)"
    lines.append(f"verdict: {word}, {tol}")
    return "\n".join(lines)
