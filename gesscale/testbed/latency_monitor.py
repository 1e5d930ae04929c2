"""The live measured latency map: every control period, probe the links the placement depends on, smooth, and give the
control loop its view of the network (issue 32, point 3; docs/events.md, "What the controller sees").

`LatencyMonitor` runs one round of probes per control period: each fog node to the site (the broker and the driver)
and each pair of fog nodes once, at most `parallel` at a time. Rounds run on their own clock (`start`: a thread,
one round every period), not only at the loop's observations: a reconfiguration blocks the loop for 40-60 s on the
testbed, and a link that degrades meanwhile must be known when the loop observes again (issue 32's live check: with
rounds at observations only, fog1's +60 ms links were detected 114 s after the change, two blocked scale-ups
later). The loop's observation runs a round too when the last is older than half a period. A probe is a few pings
from inside the source node's groups through the delay engine (`gesscale.testbed.wan_measure.GroupPinger`), never a
read of the engine's table. Each round feeds `gesscale.measured_latency.MeasuredLatency` (the smoother: low median
of the last 3 rounds, changes over 5 ms logged), whose view, restricted to the fog nodes, is what the loop reasons
on (`network`), and whose logged changes go into the period's record (`network_log`). The links of a node that is
out (crashed, gone, not yet joined: `out`) are not probed until it is back; they keep their last smoothed value.

What a round costs is counted: its wall time against the period, and per node the CPU seconds its probes' own
processes used (their rusage) against the node's budget over the period (cores x period), since the probes run
inside the node's CPU group and so take from its budget.

This module is the logic: it does no I/O itself; the probe (`Measurer`) is given, so a test drives it with a fake.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gesscale.latency_map import LatencyMap
from gesscale.measured_latency import LatencyChange, MeasuredLatency

PINGS = 3  # echoes per probe: the median of 3 is robust to one late echo
PING_INTERVAL_S = 0.1
PARALLEL = 16  # probes in flight at once: a round of 9 nodes (45 probes) is 3 waves of ~0.3 s


@dataclass(frozen=True)
class Probe:
    """One link to measure: pings from `src`'s groups (the fog node that pays their CPU) to `dst`."""

    src: str
    dst: str


@dataclass(frozen=True)
class ProbeResult:
    """What one probe saw: echoes sent, the RTT of each reply (ms), the CPU its processes used (s), and why it
    failed when it could not run."""

    probe: Probe
    sent: int
    times_ms: tuple[float, ...] = ()
    cpu_s: float = 0.0
    error: str = ""

    @property
    def rtt_ms(self) -> float | None:
        """The median reply time; None when no echo came back (the pair unreachable, or the probe failed)."""
        return statistics.median(self.times_ms) if self.times_ms else None


Measurer = Callable[[Probe], ProbeResult]


def plan_probes(fog: Sequence[str], site: str) -> list[Probe]:
    """The probes of one round: each fog node to the site, and each pair of fog nodes once, sent alternately from
    the one and the other so that every node pays about as much (a site that is a fog node is one of the pairs)."""
    probes = [Probe(n, site) for n in fog] if site not in fog else []
    for i, a in enumerate(fog):
        for j in range(i + 1, len(fog)):
            b = fog[j]
            probes.append(Probe(a, b) if (i + j) % 2 == 0 else Probe(b, a))
    return probes


@dataclass
class RoundReport:
    """One round: when (the controller's clock), how long it took, what it saw, what it cost, what it logged."""

    time_s: float
    took_s: float
    period_s: float
    results: list[ProbeResult]
    cpu_s: dict[str, float]
    budget_s: dict[str, float]
    changes: tuple[LatencyChange, ...] = ()
    out: tuple[str, ...] = ()  # the nodes out in this round (crashed, gone, not yet joined): nothing probed

    @property
    def unreachable(self) -> list[Probe]:
        """Probes with no reply (their pair keeps its last smoothed value)."""
        return [r.probe for r in self.results if r.rtt_ms is None]

    def cpu_share(self) -> dict[str, float]:
        """Per node, the probes' CPU over the node's budget in the period (0.01 is 1 % of its budget)."""
        return {n: (c / self.budget_s[n] if self.budget_s.get(n) else 0.0) for n, c in self.cpu_s.items()}

    def to_dict(self) -> dict[str, Any]:
        """The round as one line of the run's record (`network-monitor.jsonl`)."""
        return {"t_s": round(self.time_s, 3), "took_s": round(self.took_s, 3), "period_s": round(self.period_s, 3),
                "probes": len(self.results), "answered": sum(r.rtt_ms is not None for r in self.results),
                "rtt_ms": {f"{r.probe.src}->{r.probe.dst}": None if r.rtt_ms is None else round(r.rtt_ms, 3)
                           for r in self.results},
                "errors": {f"{r.probe.src}->{r.probe.dst}": r.error for r in self.results if r.error},
                "cpu_s": {n: round(c, 4) for n, c in self.cpu_s.items()},
                "cpu_share_of_budget": {n: round(s, 5) for n, s in self.cpu_share().items()},
                "changes": [c.to_dict() for c in self.changes], "out": list(self.out)}


@dataclass
class LatencyMonitor:
    """Probe rounds, the smoother, and the view and log the control loop is given (module docstring).

    `measured` holds the prior (the controller's map over the fog nodes and the site) and the source; `fog` are
    the fog nodes (the loop's view is restricted to them), `site` the node of the broker and driver; `measure`
    runs one probe; `budgets` are the nodes' CPU budgets in cores; `period_s` the control period; `map_time(t)`
    turns the controller's clock into the map's (the time of its `changes:`); `clock` is a monotonic clock (the
    round's wall time); `on_round` is told of each round (the run's record); `out()` gives the nodes out now
    (crashed, gone, not yet joined: `LocalBackend.out_nodes`), whose links are not probed until they are back.
    """

    measured: MeasuredLatency
    fog: list[str]
    site: str
    measure: Measurer
    budgets: Mapping[str, float]
    period_s: float
    parallel: int = PARALLEL
    map_time: Callable[[float], float] = float
    clock: Callable[[], float] = time.monotonic
    on_round: Callable[[RoundReport], None] | None = None
    out: Callable[[], Collection[str]] | None = None
    rounds: list[RoundReport] = field(default_factory=list)
    probes: list[Probe] = field(init=False, default_factory=list)
    _last: float | None = None
    _view: tuple[LatencyMap, LatencyMap] | None = None  # (the smoother's view, it restricted to the fog nodes)
    _seen: tuple[LatencyMap, LatencyMap] | None = None  # the same for `seen`
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _logged: int = 0  # changes already handed to the loop (`network_log`)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        if self.parallel < 1:
            raise ValueError("parallel must be at least 1")
        missing = [n for n in [*self.fog, self.site] if n not in self.measured.prior.nodes]
        if missing:
            raise ValueError(f"nodes {missing} are not in the prior map")
        self.probes = plan_probes(self.fog, self.site)

    def probe_round(self, time_s: float) -> RoundReport:
        """Run every probe (at most `parallel` at once), feed the smoother at `time_s`, record the round.

        A probe from or to a node that is out (`out`) is not run: a crashed node's groups hold nothing that could
        answer for its links, and a node gone or not yet joined has no links to measure. Its pairs get no sample,
        so they keep their smoothed value (no change is logged for them) until the node is back and measured."""
        start = self.clock()
        out = frozenset(self.out()) if self.out is not None else frozenset()
        probes = [p for p in self.probes if p.src not in out and p.dst not in out]
        with ThreadPoolExecutor(max_workers=min(self.parallel, max(1, len(probes))),
                                thread_name_prefix="gesscale-latency-probe") as pool:
            results = list(pool.map(self._one, probes))
        took = self.clock() - start
        names = self.measured.names
        index = {n: i for i, n in enumerate(names)}
        m = np.full((len(names), len(names)), np.nan)
        cpu = dict.fromkeys((n for n in self.fog if n not in out), 0.0)
        for r in results:
            cpu[r.probe.src] = cpu.get(r.probe.src, 0.0) + r.cpu_s
            if (rtt := r.rtt_ms) is not None:
                m[index[r.probe.src], index[r.probe.dst]] = rtt
        period = self.period_s if self._last is None else max(time_s - self._last, 1e-6)
        budget = {n: self.budgets.get(n, 0.0) * period for n in cpu}
        changes = tuple(self.measured.add(time_s, m))
        report = RoundReport(time_s, took, period, results, cpu, budget, changes,
                             tuple(n for n in dict.fromkeys([*self.fog, self.site]) if n in out))
        self._last = time_s
        self.rounds.append(report)
        if self.on_round is not None:
            self.on_round(report)
        return report

    def _one(self, probe: Probe) -> ProbeResult:
        try:
            return self.measure(probe)
        except Exception as err:  # noqa: BLE001 - a failed probe is a pair without a sample, never a failed period
            return ProbeResult(probe, 0, error=f"{type(err).__name__}: {err}")

    def network(self, time_s: float) -> LatencyMap:
        """The loop's `network` hook: the view at `time_s`, over the fog nodes. A round of probes runs first when
        this is a new period (half a period after the last round: a second call for the same period, e.g. to ask
        whether the loop is in its warm-up, measures nothing)."""
        with self._lock:
            if self._last is None or time_s >= self._last + 0.5 * self.period_s:
                self.probe_round(time_s)
            view = self.measured.view(self.map_time(time_s))
            if self._view is None or self._view[0] is not view:
                self._view = (view, view.subset(self.fog))
            return self._view[1]

    def seen(self, time_s: float) -> LatencyMap:
        """The network as last measured at `time_s`, over the fog nodes, without probing (rounds are the loop's
        and the monitor's thread's, one a period): each pair's smoothed RTT where it was measured, the prior in
        force where it was not (nothing measured yet, a pair that never answered), whatever the source. What the
        backend labels the ND_max of its observations and reconfigurations with (`LocalBackend.follow_network`),
        so that the model learns from the network its replicas ran on, not from the operator's map; with `both`
        it is the loop's `network` view itself. Waits for a round under way (a few seconds at most)."""
        with self._lock:
            view = self.measured.view(self.map_time(time_s), "both")
            if self._seen is None or self._seen[0] is not view:
                self._seen = (view, view.subset(self.fog))
            return self._seen[1]

    def unconfirmed(self, threshold_ms: float) -> tuple[tuple[str, str], ...]:
        """The loop's `network_unconfirmed` hook: the pairs of fog nodes whose last round rose above their smoothed
        RTT by more than `threshold_ms`, not yet taken (`MeasuredLatency.unconfirmed`)."""
        fog = set(self.fog)
        with self._lock:
            return tuple(p for p in self.measured.unconfirmed(threshold_ms) if p[0] in fog and p[1] in fog)

    def network_log(self, time_s: float) -> tuple[LatencyChange, ...]:
        """The loop's `network_log` hook: the changes logged since the loop last asked (by the rounds of its
        period, the background ones included), each with the time of the round that logged it."""
        with self._lock:
            changes = tuple(self.measured.changes[self._logged:])
            self._logged = len(self.measured.changes)
            return changes

    def start(self, now: Callable[[], float]) -> None:
        """Run a round every period on a thread of its own, `now()` giving the controller's clock; a round is
        skipped when the loop's observation ran one less than half a period before."""
        if self._thread is not None:
            return
        self._stop.clear()

        def every_period() -> None:
            while not self._stop.wait(self.period_s):
                with self._lock:
                    t = now()
                    if self._last is None or t >= self._last + 0.5 * self.period_s:
                        self.probe_round(t)

        self._thread = threading.Thread(target=every_period, name="gesscale-latency-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the rounds of `start` (the round under way completes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.period_s + 30.0)
            self._thread = None

    def summary(self) -> dict[str, Any]:
        """The monitor in the run's report: rounds, their wall time against the period, the CPU share of each
        node's budget (mean and largest over the rounds) and every logged change."""
        rounds = self.rounds
        shares: dict[str, list[float]] = {}
        for r in rounds:
            for n, s in r.cpu_share().items():
                shares.setdefault(n, []).append(s)
        return {
            "latency_source": self.measured.source, "site": self.site, "probes_per_round": len(self.probes),
            "parallel": self.parallel, "rounds": len(rounds),
            "round_s": {"mean": round(statistics.fmean(r.took_s for r in rounds), 3) if rounds else None,
                        "max": round(max((r.took_s for r in rounds), default=0.0), 3)},
            "unreachable_probes": sum(len(r.unreachable) for r in rounds),
            "cpu_share_of_budget": {n: {"mean": round(statistics.fmean(v), 5), "max": round(max(v), 5)}
                                    for n, v in shares.items()},
            "changes": [c.to_dict() for c in self.measured.changes],
        }
