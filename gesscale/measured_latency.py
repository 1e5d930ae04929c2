"""A latency map kept from measured round-trip times, and the view of the network the controller is given.

A latency-aware controller that only reads the operator's map is aware of a file, not of the network: a link
that degrades without the map saying so goes unseen (issue 32, point 3; docs/events.md, "What the controller
sees"). `MeasuredLatency` keeps a smoothed RTT per pair of the map's nodes from one round of probes per control
period and gives the loop the map it should reason on, for each `--latency-source`:

- `map`: the prior only (the operator's map, with its own `changes:`); nothing is measured.
- `measured`: measurements only. A pair never measured is unknown and taken as `UNMEASURED_RTT_MS` (the
  largest RTT a map takes): as far as the controller knows it may not be reachable, so no placement prefers it
  while a measured pair is free. A pair whose probes stopped keeps its last smoothed value.
- `both`: the map is the prior; a pair's smoothed measurement replaces the map's value once it has one.

Smoothing: the low median of the pair's samples in the last `WINDOW` = 3 periods (the middle of three, the lower
of two, the one of one). A step is taken after at most two samples of the new value (two of three are then on
its side; a step down with two samples, after one), so within two control periods of the change; one outlying
sample is never the middle of three, nor, when high, the lower of two, so it does not move the value. RTT noise
is one-sided (queues, retransmissions and scheduling add delay; nothing removes propagation), hence the lower of
two. A mean or an exponential average lets every outlier move the value, and any weight that damps an outlier
delays a step by more than two periods. A pair's first sample is taken as is: there is nothing to compare it
with (so a map wrong from the start is corrected at the first period's end).

The change log: after each round, every pair whose smoothed value moved by more than `threshold_ms` since the
value last logged for it (at first: the map's) is recorded as a `LatencyChange` (pair, old, new, time), for the
decision log; a slow drift is logged once it adds up to the threshold.

Pure: no I/O. Who measures is the caller's: the simulator samples the RTT in force at the end of each period
(`gesscale.sim_backend`); on the local testbed, `gesscale.testbed.latency_monitor` pings every link from inside
the fog nodes each period. Every pair is measured each period (N(N-1)/2 probes),
so a measured view is for maps of at most `MEASURED_MAX_NODES` nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gesscale.config import LATENCY_SOURCES
from gesscale.errors import UserError
from gesscale.latency_map import GRAPH_MAX_NODES, MAX_RTT_MS, LatencyMap
from gesscale.rtt_table import DenseRtts

__all__ = ["LATENCY_SOURCES", "LatencyChange", "MeasuredLatency", "check_source"]

WINDOW = 3
# Smoothed changes smaller than this are not logged: above the jitter of a quiet link (a few ms), below the move
# threshold (`ControllerConfig.move_threshold_ms`, 10 ms), so every change that may move a replica is in the log.
CHANGE_THRESHOLD_MS = 5.0
UNMEASURED_RTT_MS = MAX_RTT_MS
# Every node probes every other node each period: 300 nodes are 44 850 probes a period, past what a fog measures
# all to all (a large fog would measure a neighbourhood: not built).
MEASURED_MAX_NODES = GRAPH_MAX_NODES


@dataclass(frozen=True)
class LatencyChange:
    """A smoothed RTT that moved by more than the threshold: the pair, the value logged before, the new value, and
    the time of the round of probes that moved it (the end of a control period)."""

    time_s: float
    a: str
    b: str
    old_ms: float
    new_ms: float

    def to_dict(self) -> dict[str, Any]:
        """The change as a record (JSON, the decision log)."""
        return {"t_s": self.time_s, "pair": [self.a, self.b], "old_ms": round(self.old_ms, 3),
                "new_ms": round(self.new_ms, 3)}

    def __str__(self) -> str:
        return f"{self.a}-{self.b} {self.old_ms:g} -> {self.new_ms:g} ms"


def check_source(source: str, lmap: LatencyMap, where: str = "latency_source") -> None:
    """Refuse (one `UserError` line) an unknown source, or a measured one on a map too large to probe all to all."""
    if source not in LATENCY_SOURCES:
        raise UserError(f"{where} must be one of {', '.join(LATENCY_SOURCES)}, got {source!r}")
    if source != "map" and len(lmap.names) > MEASURED_MAX_NODES:
        raise UserError(f"{where} {source}: every pair is measured each period, for maps of at most "
                        f"{MEASURED_MAX_NODES} nodes; {lmap.source} has {len(lmap.names)} (use map)")


class MeasuredLatency:
    """Smoothed RTTs of every pair of a map's nodes from one round of probes per period, and the controller's view.

    `prior` is the operator's map (its `changes:` included: `view` takes the prior in force at the time asked);
    `source` one of `LATENCY_SOURCES`. `add` takes a round of samples, `view` gives the map the loop reasons on,
    `changes` lists the logged changes. See the module docstring for the smoothing and the log.
    """

    def __init__(self, prior: LatencyMap, source: str = "both", window: int = WINDOW,
                 threshold_ms: float = CHANGE_THRESHOLD_MS) -> None:
        check_source(source, prior)
        if window < 1:
            raise ValueError("window must be at least 1")
        self.prior = prior
        self.source = source
        self.threshold_ms = float(threshold_ms)
        self.names = list(prior.names)
        n = len(self.names)
        self._samples = np.full((window, n, n), np.nan)
        self._rounds = 0
        self.smoothed_ms = np.full((n, n), np.nan)  # NaN: never measured
        np.fill_diagonal(self.smoothed_ms, 0.0)
        self._logged = prior.array()  # the value last logged per pair (the map's at first)
        self.changes: list[LatencyChange] = []
        self._handed = 0  # changes handed out by `changes_until`
        self._by_time: dict[float, tuple[LatencyChange, ...]] = {}
        self._base: dict[int, tuple[LatencyMap, np.ndarray]] = {}  # id of a prior in force -> (it, its RTTs)
        self._views: dict[str, tuple[np.ndarray, LatencyMap]] = {}  # per source: the last derived view, its RTTs

    def add(self, time_s: float, rtt_ms: np.ndarray) -> list[LatencyChange]:
        """One round of probes at `time_s`: an N x N matrix in the map's order (NaN: no sample of that pair, e.g.
        a probe that timed out; the two directions of a pair are averaged). Returns the changes it logged."""
        m = np.array(rtt_ms, dtype=np.float64)
        n = len(self.names)
        if m.shape != (n, n):
            raise ValueError(f"expected a {n} x {n} matrix of RTTs, got shape {m.shape}")
        if np.any(m < 0):
            raise ValueError("an RTT cannot be negative")
        m = np.where(np.isnan(m), m.T, m)  # one direction measured: it stands for the pair
        m = (m + m.T) / 2.0  # both: their mean (a pair has one RTT in the map)
        np.fill_diagonal(m, 0.0)
        self._samples[self._rounds % len(self._samples)] = m
        self._rounds += 1
        present = (~np.isnan(self._samples)).sum(axis=0)
        ordered = np.sort(self._samples, axis=0)  # NaN last
        low = np.maximum(present - 1, 0) // 2  # the low median's rank among the samples present
        median = np.take_along_axis(ordered, low[None, :, :], axis=0)[0]
        self.smoothed_ms = np.where(present > 0, median, self.smoothed_ms)
        return self._log(float(time_s))

    def _log(self, time_s: float) -> list[LatencyChange]:
        s, logged = self.smoothed_ms, self._logged
        moved = ~np.isnan(s) & (np.abs(s - logged) > self.threshold_ms)
        out = []
        for i, j in zip(*np.nonzero(np.triu(moved, 1)), strict=True):
            out.append(LatencyChange(time_s, self.names[i], self.names[j], float(logged[i, j]), float(s[i, j])))
            logged[i, j] = logged[j, i] = s[i, j]
        self.changes.extend(out)
        if out:
            self._by_time[time_s] = (*self._by_time.get(time_s, ()), *out)
        return out

    def unconfirmed(self, threshold_ms: float) -> tuple[tuple[str, str], ...]:
        """The pairs whose last round's sample rose above their smoothed RTT by more than `threshold_ms`: a rise
        the smoother has not taken yet (it takes a step up after two samples of it, so a rise first shows here,
        one round early). An outlier shows here too, for one round. Used by the control loop to hold a scale-up
        beside links that may have just degraded (`gesscale.mape`). Empty before the second round: a pair's
        first sample is taken as is."""
        if self._rounds < 2:
            return ()
        last = self._samples[(self._rounds - 1) % len(self._samples)]
        with np.errstate(invalid="ignore"):
            rose = ~np.isnan(last) & ~np.isnan(self.smoothed_ms) & (last - self.smoothed_ms > threshold_ms)
        return tuple((self.names[i], self.names[j]) for i, j in zip(*np.nonzero(np.triu(rose, 1)), strict=True))

    def changes_until(self, time_s: float) -> tuple[LatencyChange, ...]:
        """The changes logged by the rounds up to `time_s` that were not handed out before, each with the time of
        its round: the loop's `network_log` (a round may run while a reconfiguration blocks the loop, as the live
        monitor's do; its changes reach the loop's record at the next observation, once)."""
        out = tuple(c for c in self.changes[self._handed:] if c.time_s <= time_s)
        self._handed += len(out)
        return out

    def changes_at(self, time_s: float) -> tuple[LatencyChange, ...]:
        """The changes logged by the round of probes at `time_s` (the end of a control period)."""
        return self._by_time.get(float(time_s), ())

    def _prior_at(self, time_s: float) -> tuple[LatencyMap, np.ndarray]:
        lmap = self.prior.at(time_s)
        cached = self._base.get(id(lmap))
        if cached is None or cached[0] is not lmap:
            cached = self._base[id(lmap)] = (lmap, lmap.array())
        return cached

    def view(self, time_s: float, source: str | None = None) -> LatencyMap:
        """The map the controller reasons on at `time_s`, for the source (module docstring; `source` None: this
        one's, else another's over the same measurements, e.g. `both` for the best estimate of each pair). The
        prior in force itself when every pair agrees with it (its placement graph is reused; a run whose network
        matches its map is what it would be with the map), else a map of the values (rebuilt only when they
        change)."""
        source = self.source if source is None else source
        prior, base = self._prior_at(time_s)
        if source == "map":
            return prior
        fill = base if source == "both" else UNMEASURED_RTT_MS
        values = np.where(np.isnan(self.smoothed_ms), fill, self.smoothed_ms)
        if np.array_equal(values, base):
            return prior
        last = self._views.get(source)
        if last is not None and np.array_equal(values, last[0]):
            return last[1]
        rtts = DenseRtts(prior.names, prior.index, np.ascontiguousarray(values))
        lmap = LatencyMap(prior.nodes, rtts, f"{prior.source} ({source})", [], dict(prior.link_defaults),
                          {p: dict(v) for p, v in prior.links.items()})
        self._views[source] = (values, lmap)
        return lmap
