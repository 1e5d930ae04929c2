"""Trace-driven fluid simulator of one operator on a fog cluster (docs/controller.md, Simulator).

Time advances in steps of one second. Each second, input arrives (the workload's rate), the replicas process
up to their true MST — alpha n^beta - gamma ND_max from the scenario's ground truth, times a relative noise
drawn per second — and what they cannot take accumulates as backlog. During a reconfiguration pause nothing
is processed; afterwards the backlog is caught up at MST. When the workload ends, input stops and the run goes
on until the backlog has drained (or a limit of one more workload length).

A reconfiguration follows its kind's timing (`GroundTruth.timing`): by default (the paper's restart) the new
configuration is in place at the decision and nothing is processed for `reconfig_pause_s`. A twin of a live run
gives each kind its measured timing instead (`operator.reconfig`): until the change is effective (`effective_s`
after the decision) the smaller of the old and the new configuration serves, nothing is processed in its last
`pause_s`, and the loop's next observation ends `observation_gap_s` after the decision (default: effective_s plus
one control period) and reports only the seconds since the change became effective (as the live backend, which
starts its next period then), so no period is observed while a change is under way.

A twin of a live run may also start cold (`operator.cold_start`, measured in the run's first period, before any
decision): for its first `seconds` at most `rate` records/s are processed and no back pressure is signalled, and
the first observation ends then. With the scenario's `after_drain` the run goes on after the drain, until the loop's
end rule (`gesscale.run_end`) ends it, as a live demo run.

The network follows the latency map's `changes:` schedule: from each change time on (second t uses
`latency_map.at(t)`), ND_max of the replicas in place, hence their true MST, is that of the map in force, and so
are the nodes a placement starts from and the ideal demand of the metrics. A map without changes is one segment.

Signals derived from that state, per control period:
- bp_upstream: fraction of seconds in which more data was available than the operator could take (the source
  held data back: Spark's admission control binding, Flink's back-pressured source);
- bp_operator: 0 (the operator writes to Kafka, nothing downstream pushes back);
- cpu: processed / capacity, plus a small measurement noise (0 during a pause); busy: the same without noise. A
  twin of a live run gives the CPU a busy operator reported at each size instead (`operator.cpu`): busy times its
  share at the replicas, with its noise drawn once per period.
Deterministic for a given seed.

Fog events (the map's `schedule()`: `changes:` entries with `event:`, `--events FILE`; docs/events.md) act on
the replicas from the second they happen. A crashed node loses its replica at once, and so does a leaving node
at the end of its drain (until then it keeps serving and takes no new replica); either costs the scenario's
reconfiguration pause (the lost tasks run again; the drained replica goes as in a scale-down). A replica cut off
from the others by a partition or a flap's down phase is alive but serves nothing; cut off for
NETWORK_TIMEOUT_S it is declared lost (Spark's executor timeout), as after a crash. The next observation lists
the lost replicas (`Observation.lost`). A crashed, gone or not yet joined node is not ready, a leaving one or
one with a down link to a serving replica is cordoned, so no placement chooses it. Without events nothing of
this runs and a run is what it was before events existed.

What the controller sees of the network (`--latency-source`, docs/events.md): with a `MeasuredLatency`, the
backend probes every pair at the end of each observed period, noiselessly: the mean RTT in force in the
period's last second (the map with its changes and the events' link entries: the truth), and feeds the smoother
the loop reads; through an observation longer than a period (a change's observation gap), every period too, as
the live monitor's rounds run while a reconfiguration blocks the loop. Without it (`map`), nothing is measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np

from gesscale import placement
from gesscale.backend import Backend
from gesscale.events import DOWN, GONE, LEAVING, UP, serving_set
from gesscale.latency_map import LatencyMap
from gesscale.measured_latency import MeasuredLatency
from gesscale.observation import NodeState, Observation, Placement, Reconfiguration
from gesscale.scenario import Scenario
from gesscale.site_view import SiteView
from gesscale.workloads import rate_profile

CPU_NOISE = 0.02
# A replica cut off from the others this long is declared lost: Spark's `spark.network.timeout` default (120 s),
# after which the driver drops an executor whose heartbeats stopped.
NETWORK_TIMEOUT_S = 120


class SimBackend(Backend):
    """The simulator, behind the same interface as the real backends."""

    def __init__(self, scenario: Scenario, seed: int | None = None, drain_limit: float = 1.0,
                 measured: MeasuredLatency | None = None) -> None:
        self.scenario = scenario
        # The controller's measured view (`--latency-source measured|both`): fed the true RTTs every control
        # period (module docstring).
        self.measured = measured
        self._probed: tuple[LatencyMap, np.ndarray] | None = None
        self.seed = scenario.seed if seed is None else seed
        self.truth = scenario.truth
        self.lmap = scenario.latency_map
        self._node_states: list[NodeState] | None = None
        self._change_secs = sorted({int(math.ceil(t)) for t in self.lmap.change_times})
        self._graphs: dict[int, nx.Graph] = {}
        self.site = scenario.site  # broker and driver (cluster.site): a controller's `model_latency: site` reads it
        self._truth_views: dict[int, Any] = {}
        self.network = self.lmap.at(0)  # the map in force now
        self.graph = self._graph_of(self.network)
        self._next_change = self._change_after(0)
        self.period = max(1, int(round(scenario.control_period_s)))
        self.rate = rate_profile(scenario.workload, seed=self.seed)
        self.input_end = len(self.rate)
        self.horizon = self.input_end + int(math.ceil(drain_limit * self.input_end)) + self.period
        rng = np.random.default_rng([self.seed, 7])
        self._mst_noise = np.maximum(0.0, 1.0 + rng.normal(0.0, self.truth.noise, self.horizon))
        self._cpu_noise = rng.normal(0.0, CPU_NOISE, self.horizon)
        # Timeline, one entry per simulated second.
        self.input = np.zeros(self.horizon)
        self.processed = np.zeros(self.horizon)
        self.backlog_at = np.zeros(self.horizon)
        self.supply = np.zeros(self.horizon, dtype=int)
        self.delay = np.zeros(self.horizon)
        self.t = 0
        self.backlog = 0.0
        self.pause_left = 0  # seconds until the last reconfiguration is effective
        self.serve_left = 0  # of those, the first ones, served at `_serving_mst` (before the pause)
        self._serving_nodes: tuple[str, ...] = ()  # the configuration that serves them (the smaller capacity)
        self._serving_mst = 0.0
        self._next_span: int | None = None  # the next observation's length, when a reconfiguration sets it
        self._unobserved = 0  # its first seconds, until the change is effective, which it does not report
        self.reconfigurations: list[Reconfiguration] = []
        # Fog events: node states not UP, links down, when each cut-off replica was cut, replicas lost since the
        # last observation.
        self.schedule = self.lmap.schedule()
        self._events = not self.schedule.empty
        self._states: dict[str, str] = {}
        self._down: set[frozenset[str]] = set()
        self._cut_since: dict[str, int] = {}
        self._lost: list[str] = []
        self._serving: tuple[str, ...] = ()
        self._next_event = math.inf
        self._applied_at = -1
        names = scenario.latency_map.names
        if self._events:
            self._states = self.schedule.states(0)
            self._down = self.schedule.down_pairs(0)
            names = [n for n in names if self._states.get(n, UP) == UP]
        # the scenario's first nodes (a twin's: the live run's), those up at t = 0, completed as a scale-up would
        start = [n for n in scenario.truth.initial_nodes or () if n in names]
        start += placement.grow(self.graph, start, [n for n in names if n not in start],
                                scenario.truth.initial_replicas - len(start))
        self._set_nodes(tuple(start))
        if self._events:
            self._next_event = self._event_after(0)

    def _set_nodes(self, nodes: tuple[str, ...]) -> None:
        self._nodes = nodes
        if not self._events:
            self._serving = nodes
            self._nd = placement.nd_max(self.graph, nodes)
            self._mst = self.truth.mst(len(nodes), self._truth_latency(self.network, nodes))
            return
        self._serving, _ = serving_set(nodes, self._down)
        self._nd = placement.nd_max(self.graph, self._serving)
        self._mst = (self.truth.mst(len(self._serving), self._truth_latency(self.network, self._serving))
                     if self._serving else 0.0)
        self._node_states = None  # who is reachable depends on the serving replicas

    def _event_after(self, t: int) -> float:
        """The first second after `t` at which an event changes something (a cut-off replica's timeout included)."""
        nxt = self.schedule.next_change(float(t))
        if self._cut_since:
            nxt = min(nxt, min(self._cut_since.values()) + NETWORK_TIMEOUT_S)
        return float(max(t + 1, math.ceil(nxt))) if nxt < math.inf else math.inf

    def _events_at(self, t: int) -> None:
        """Put the fog's state at second `t` in place: lose the replicas of crashed or gone nodes and those cut off
        past the timeout; the others serve if they can reach each other."""
        self._states = self.schedule.states(float(t))
        self._down = self.schedule.down_pairs(float(t))
        gone = [n for n in self._nodes if self._states.get(n, UP) in (DOWN, GONE)]
        alive = tuple(n for n in self._nodes if n not in gone)
        _, cut = serving_set(alive, self._down)
        self._cut_since = {n: self._cut_since.get(n, t) for n in cut}
        timed_out = [n for n in cut if t - self._cut_since[n] >= NETWORK_TIMEOUT_S]
        for n in timed_out:
            del self._cut_since[n]
        lost = (*gone, *timed_out)
        if lost:
            kept = tuple(n for n in alive if n not in timed_out)
            pause = int(round(self.truth.reconfig_pause_s))
            self.pause_left = max(self.pause_left, pause)
            self._lost.extend(lost)
            self._set_nodes(kept)
            self.reconfigurations.append(Reconfiguration(
                time_s=float(t), kind="lost", added=(), removed=lost, nodes=kept, nd_max_ms=self._nd,
                pause_s=float(pause), reason="; ".join(f"{n} {self._states.get(n, 'cut off')}" for n in lost),
            ))
        else:
            self._set_nodes(self._nodes)
        self._next_event = self._event_after(t)

    def _graph_of(self, lmap: LatencyMap) -> nx.Graph:
        """The placement graph of one map in force (built once per map of the schedule)."""
        key = lmap.applied
        if key not in self._graphs:
            self._graphs[key] = lmap.placement_graph()
        return self._graphs[key]

    def truth_view(self, lmap: LatencyMap) -> Any:
        """What the operator's true MST takes its latency from on one map in force: the placement graph (ND_max)
        or, with `operator.latency: site`, the map's site view (built once per map of the schedule)."""
        if self.truth.latency != "site":
            return self._graph_of(lmap)
        key = lmap.applied
        if key not in self._truth_views:
            self._truth_views[key] = SiteView(lmap, str(self.site))
        return self._truth_views[key]

    def _truth_latency(self, lmap: LatencyMap, nodes: Sequence[str]) -> float:
        """The latency the true MST of `nodes` takes on `lmap` (ND_max, or the farthest one's RTT to the site)."""
        return placement.nd_max(self.truth_view(lmap), nodes)

    def _change_after(self, t: int) -> float:
        """The first second after `t` at which the map changes (inf when it no longer does)."""
        later = [c for c in self._change_secs if c > t]
        return float(later[0]) if later else math.inf

    def _network_at(self, t: int) -> None:
        """Put the map in force at second `t` in place: ND_max and true MST of the replicas follow it."""
        self.network = self.lmap.at(t)
        self.graph = self._graph_of(self.network)
        self._next_change = self._change_after(t)
        self._set_nodes(self._nodes)
        if self.serve_left > 0:
            self._serving_mst = self.truth.mst(len(self._serving_nodes),
                                               self._truth_latency(self.network, self._serving_nodes))

    # -- Backend interface ------------------------------------------------------------------------------
    def nodes(self) -> list[NodeState]:
        """Every node of the latency map: all schedulable without events (one list, built once: a fog may have
        10 000 nodes); with events, crashed, gone and not yet joined nodes are not ready, leaving ones and those
        with a down link to a serving replica cordoned (the list is rebuilt when that changes)."""
        if self._node_states is None:
            if not self._events:
                self._node_states = [NodeState(n) for n in self.scenario.latency_map.names]
            else:
                serving = set(self._serving)
                unreachable: set[str] = set()
                for pair in self._down:
                    a, b = tuple(pair)
                    if a in serving and b not in serving:
                        unreachable.add(b)
                    if b in serving and a not in serving:
                        unreachable.add(a)
                self._node_states = [
                    NodeState(n, ready=self._states.get(n, UP) in (UP, LEAVING),
                              cordoned=self._states.get(n, UP) == LEAVING or n in unreachable)
                    for n in self.scenario.latency_map.names
                ]
        return list(self._node_states)

    def current(self) -> Placement:
        """Replica nodes now."""
        return Placement(self._nodes, self._nd)

    @property
    def finished(self) -> bool:
        """Input over and backlog drained, or the drain limit reached; with the scenario's `after_drain` only the
        drain limit (the loop's end rule, `gesscale.run_end`, ends the run: `gesscale.simulate.run_once`)."""
        if self.t >= self.horizon:
            return True
        return self.scenario.after_drain is None and self.t >= self.input_end and self.backlog < 1.0

    def observe(self) -> Observation:
        """Simulate one control period (or, after a reconfiguration with an observation gap, that gap) and report
        it."""
        cold = self.truth.cold_start
        cold_end, cold_rate = (cold.seconds, cold.rate) if cold is not None else (0, math.inf)
        first = self.period if self.t > 0 or cold is None else cold.seconds  # the first period: the cold one
        span, self._next_span = self._next_span or first, None
        t0, t1 = self.t, min(self.t + span, self.horizon)
        # after a change with a measured timing, the observation covers only the new configuration (as the live
        # backend's, which starts its next period once the change is effective); the seconds before are simulated
        observed_from, self._unobserved = min(t0 + self._unobserved, t1 - 1), 0
        rate, mst_noise, cpu_noise = self.rate, self._mst_noise, self._cpu_noise
        # a measured CPU share (GroundTruth.cpu): the CPU a busy period reports at these replicas, its noise drawn
        # once for the period (a live run measures it per period), from the same draws rescaled
        cpu_model = self.truth.cpu
        cpu_share = cpu_model.of(len(self._nodes)) if cpu_model is not None else 1.0
        cpu_scale = 1.0 if cpu_model is None else 0.0
        inp_a, proc_a, back_a, sup_a, delay_a = self.input, self.processed, self.backlog_at, self.supply, self.delay
        n, mst, end = len(self._nodes), self._mst, self.input_end
        backlog, pause_left, serve_left = self.backlog, self.pause_left, self.serve_left
        start_backlog = backlog
        bp_count = 0
        cpu_sum = busy_sum = inp_sum = proc_sum = 0.0
        paused = 0
        inv_mst = 1.0 / mst if mst > 0 else math.inf
        next_change = self._next_change
        next_event = self._next_event
        for i in range(t0, t1):
            if i == observed_from and i > t0:  # the change under way is not part of the observation
                start_backlog, bp_count, paused = backlog, 0, 0
                cpu_sum = busy_sum = inp_sum = proc_sum = 0.0
            if i >= next_change:
                self._network_at(i)
                mst, next_change = self._mst, self._next_change
                inv_mst = 1.0 / mst if mst > 0 else math.inf
            if i >= next_event:
                self.pause_left = pause_left
                self._events_at(i)
                pause_left, next_event, n, mst = self.pause_left, self._next_event, len(self._nodes), self._mst
                # with no replica serving, the queueing delay is estimated at one replica's capacity
                inv_mst = 1.0 / (mst if mst > 0 else max(self.truth.mst(1, 0.0), 1e-9))
            inp = rate[i] if i < end else 0.0
            avail = backlog + inp
            cap = mst * mst_noise[i]
            cold_now = i < cold_end  # the cold start (GroundTruth.cold_start): no back pressure signalled
            if cold_now:
                cap = min(cap, cold_rate)
            serving = serve_left > 0
            if serving:  # the change is not effective yet: the smaller configuration serves
                serve_left -= 1
                pause_left -= 1
                cap = self._serving_mst * mst_noise[i]
            if pause_left > 0 and not serving:  # the pause, the last seconds before the change is effective
                pause_left -= 1
                paused += 1
                done = 0.0
                if avail > 0 and not cold_now:
                    bp_count += 1
            else:
                if avail > cap:
                    done = cap
                    bp_count += 0 if cold_now else 1
                else:
                    done = avail
                if cap > 0:
                    busy = done / cap
                    busy_sum += busy
                    cpu = busy * cpu_share + cpu_noise[i] * cpu_scale
                    cpu_sum += 1.0 if cpu > 1.0 else (cpu if cpu > 0.0 else 0.0)
            backlog = avail - done
            inp_a[i] = inp
            proc_a[i] = done
            back_a[i] = backlog
            sup_a[i] = n
            delay_a[i] = pause_left + (backlog * inv_mst if backlog > 0 else 0.0)  # nothing queued: no wait (0·inf)
            inp_sum += inp
            proc_sum += done
        self.backlog, self.pause_left, self.serve_left, self.t = backlog, pause_left, serve_left, t1
        if self.measured is not None:
            # a round of probes every control period, also through an observation longer than one (a change's
            # observation gap), as the live monitor's rounds run on a thread of their own and skip a round within
            # half a period of the observation's; the last one at the observation
            for r in range(t0 + self.period, t1, self.period):
                if t1 - r >= self.period / 2:
                    self.measured.add(float(r), self._rtts_at(r - 1))
            self.measured.add(float(t1), self._true_rtts())
        span = max(1, t1 - max(t0, observed_from))
        cpu_mean = cpu_sum / span
        if cpu_model is not None:
            cpu_mean = min(1.0, max(0.0, cpu_mean + cpu_noise[t0] / CPU_NOISE * cpu_model.noise))
        return Observation(
            time_s=float(t1),
            period_s=float(span),
            input_rate=inp_sum / span,
            throughput=proc_sum / span,
            backlog=backlog,
            backlog_growth=backlog - start_backlog,
            bp_upstream=bp_count / span,
            bp_operator=0.0,
            replicas=self._nodes,
            nd_max_ms=self._nd,
            cpu=cpu_mean,
            busy=busy_sum / span,
            paused_s=float(paused),
            lost=self._take_lost(),
        )

    def _true_rtts(self) -> np.ndarray:
        """The RTTs in force in the period's last second, as a round of probes would measure them: the mean RTT of
        each pair (no jitter, loss or partition: those reach the controller as lost replicas and cordoned nodes)."""
        if self._probed is None or self._probed[0] is not self.network:
            self._probed = (self.network, self.network.array())
        return self._probed[1]

    def _rtts_at(self, t: int) -> np.ndarray:
        """The RTTs in force at second `t` (as `_true_rtts`), for a round of probes inside a long observation."""
        lmap = self.lmap.at(float(max(0, t)))
        if self._probed is None or self._probed[0] is not lmap:
            self._probed = (lmap, lmap.array())
        return self._probed[1]

    def _take_lost(self) -> tuple[str, ...]:
        """The replicas lost since the last observation (reported once)."""
        lost, self._lost = tuple(self._lost), []
        return lost

    @property
    def moves_add_first(self) -> bool:  # type: ignore[override]
        """A move in one change when the operator has a measured move timing (the twin of a testbed run, whose
        moves are one change: `operator.reconfig.move`); else two, each with its direction's timing."""
        return bool(self.truth.reconfig and "move" in self.truth.reconfig)

    def apply(self, placement_: Placement, instant: bool = False) -> float:
        """Switch to the new nodes with the timing of the change's kind (module docstring); no pause, no delay
        and no observation gap when `instant`. Returns the pause (s)."""
        old_nodes = self._nodes
        old = set(old_nodes)
        new = tuple(placement_.nodes)
        if set(new) == old:
            return 0.0
        added, removed = set(new) - old, old - set(new)
        kind = "move" if added and removed and self.moves_add_first else "up" if len(new) > len(old) else "down"
        changed = 1 if kind == "move" else len(added) if kind == "up" else len(removed)
        timing = self.truth.timing(kind).for_nodes(changed)
        pause = 0 if instant else int(round(timing.pause_s))
        effective = 0 if instant else max(pause, int(round(timing.effective_s)))
        old_mst = self._mst
        self._set_nodes(new)
        # A second change in the same second (a move: add, then remove) pays its own delay after the first's.
        if self._applied_at == self.t:
            self.pause_left += effective
        else:
            self.pause_left = effective
            self.serve_left = effective - pause
            if self.serve_left > 0:
                self._serving_nodes, self._serving_mst = ((old_nodes, old_mst) if old_mst <= self._mst
                                                          else (new, self._mst))
        self._applied_at = self.t
        if not instant and self.truth.reconfig and kind in self.truth.reconfig:
            gap = timing.observation_gap_s
            span = max(1, effective + 1, int(round(gap)) if gap is not None else effective + self.period)
            self._next_span = max(span, self._next_span or 0, self.pause_left + 1)
            self._unobserved = self.pause_left  # until the change (a move: both) is effective
        self.reconfigurations.append(
            Reconfiguration(
                time_s=float(self.t),
                kind=kind,
                added=tuple(n for n in new if n not in old),
                removed=tuple(n for n in old if n not in set(new)),
                nodes=new,
                nd_max_ms=self._nd,
                pause_s=float(pause),
                started_s=float(self.t),
                effective_s=float(self.t + effective),
            )
        )
        return float(pause)

    # -- ground truth for metrics and the oracle ---------------------------------------------------------
    @property
    def mst_noise(self) -> np.ndarray:
        """The relative capacity noise of every second of the run (read-only view; the `optimal` policy's input)."""
        view = self._mst_noise.view()
        view.flags.writeable = False
        return view

    def best_mst_by_n(self, t: int = 0) -> list[float]:
        """True MST (no noise) of the best latency-aware placement of each size 0..max_replicas at second `t`."""
        graph = self.truth_view(self.lmap.at(t))
        nds = placement.best_nd_max_by_size(graph, self.lmap.names, self.scenario.max_replicas)
        return [self.truth.mst(k, nds[k]) for k in range(len(nds))]

    def demand(self) -> np.ndarray:
        """Ideal replicas d(t) for each second of the input: the fewest whose best MST sustains the input.

        The input is averaged over a trailing control period (per-second Poisson noise is not demand). Each second
        is judged by the map in force then (the best placement of a size changes with the network).
        """
        n_min, n_max = self.scenario.min_replicas, self.scenario.max_replicas
        window = self.period
        csum = np.concatenate([[0.0], np.cumsum(self.rate)])
        idx = np.arange(len(self.rate))
        lo = np.maximum(0, idx + 1 - window)
        smooth = (csum[idx + 1] - csum[lo]) / (idx + 1 - lo)
        bounds = [0, *(c for c in self._change_secs if 0 < c < len(self.rate)), len(self.rate)]
        need = np.empty(len(self.rate), dtype=int)
        for start, stop in zip(bounds, bounds[1:], strict=False):
            caps = np.asarray(self.best_mst_by_n(start))
            need[start:stop] = np.searchsorted(np.maximum.accumulate(caps[1:]), smooth[start:stop], side="left") + 1
        return np.clip(need, n_min, n_max).astype(int)
