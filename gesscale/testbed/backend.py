"""The `local` backend: the real Spark job on the fog-in-a-box testbed of this machine (gesscale.testbed).

Monitor: every control period the backend reads the micro-batches the job completed (its JSON-lines record, one
`BatchRecord` per line, so none is missed), and the input topic's end offsets from the broker, and summarises
them with `gesscale.observe.observation_from_batches` (the complete log, with the broker's offsets):
- throughput CT = rows of the batches completed in the period / period;
- input rate IR = growth of Σ end offsets of the input topic / period (what arrived, exactly);
- backlog = Σ end offsets − rows processed so far (batch ids counted once: a batch replayed after a restart
  is not counted twice);
- BP_{i-1} = share of the period's batches that were held back by admission control (docs/controller.md); 0 when no
  batch completed (a pause is not a measurement of MST);
- CPU = CPU seconds of the replicas' cgroups / (period × their budgets) (read here, passed in);
- ND_max of the replicas: from the operator's map, or, when the run measures the network (`--latency-source
  measured|both`: `follow_network`), from the latest measured view, so that the model learns each point with the
  ND_max its replicas ran with.

Execute, per strategy (docs/controller.md):
- `live`: scale-up starts the chosen node's worker (the only free slot), raises the executor target through the
  job's scaling hook and waits for the executor there; with `warm` (the default) the driver keeps the stream's
  micro-batches on the old executors until its warm-up job has run on the new one (`jobs/warm.py`,
  `jobs/hook.py`), so that the cold start does not stall a batch; scale-down kills the node's executors through
  the hook, then stops its worker. The query keeps running.
- `restart`: stop the job between batches (the checkpoint holds the offsets), start/stop workers, start the job
  again with the new executor count.
The reported pause is measured, not assumed: the longest gap between completed micro-batches from the last
batch before the change to the first batch that started after it (so a new executor's cold start, which stalls
the first micro-batch it takes part in, counts).

Node events (`events`, the run's `EventSchedule`; docs/events.md): a thread acts them out on the run's clock
(`gesscale.testbed.node_events`). A crash kills the node's worker and executors at once (`Fleet.kill_worker`)
and lowers the job's executor target to the survivors (else Spark would relaunch the lost executor on the next
worker with a free core, outside the placement); a leave's drain ends with its replica removed as in a
scale-down. `nodes()` follows the schedule (crashed, gone and not yet joined nodes are not ready, leaving ones
are cordoned, and so are those a partition or a flap cuts off from a serving replica or the site),
`current()` leaves out the nodes killed or gone, and the next observation lists the replicas lost
(`Observation.lost`), as the simulator's does, so the control loop replaces them. A replica whose executor Spark
dropped on its own (a partitioned node's, after Spark's network timeout) is lost too: listed once, the executor
target lowered and the node's worker stopped, so that nothing comes back outside the placement when the
partition heals (`_declared_lost`; docs/events.md, "Node events on the testbed").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from gesscale.backend import STRATEGIES, Backend, ReconfigurationFailed
from gesscale.batch_record import BatchRecord
from gesscale.errors import UserError
from gesscale.events import DOWN, GONE, LEAVING, UP, EventSchedule, serving_set
from gesscale.latency_map import LatencyMap
from gesscale.observation import NodeState, Observation, Placement, Reconfiguration
from gesscale.observe import InputOffsets, observation_from_batches
from gesscale.testbed.fleet import Fleet
from gesscale.testbed.job import TestbedJob, read_batches
from gesscale.testbed.node_events import RECORD_FILE, NodeAction, NodeEventDriver, node_actions
from jobs.hook_client import HookError

log = logging.getLogger(__name__)
LOSS_WAIT_S = 10.0  # after a crash, how long to wait for Spark to drop the lost executor from its active list


class NodeUnavailable(ReconfigurationFailed):
    """`apply` was asked for a node that is not schedulable now (crashed, gone, not joined, leaving); nothing was
    changed. The loop plans again at the next period with the nodes as they are."""


@dataclass
class BatchLog:
    """Every micro-batch the job completed (from its JSON lines), read incrementally."""

    job: TestbedJob
    offset: int = 0
    batches: list[BatchRecord] = field(default_factory=list)
    seen_ids: set[int] = field(default_factory=set)
    processed: int = 0  # rows of distinct batch ids

    def poll(self) -> list[BatchRecord]:
        """New batches since the last poll."""
        new, self.offset = read_batches(self.job.batches_path, self.offset)
        for b in new:
            if b.batch_id not in self.seen_ids:
                self.seen_ids.add(b.batch_id)
                self.processed += b.num_input_rows
        self.batches.extend(new)
        return new

    def completions_between(self, t0: float, t1: float) -> list[float]:
        """Completion times (unix s) of the batches in [t0, t1]."""
        return [b.time for b in self.batches if t0 <= b.time <= t1]


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval without a completed batch that overlaps [start, end] (s).

    `times` are batch completion times; the gap that contains the change is bounded by the last completion
    before `start` and the first after `end`.
    """
    times = sorted(times)
    before = [t for t in times if t <= start]
    after = [t for t in times if t >= end]
    inside = [t for t in times if start < t < end]
    points = ([before[-1]] if before else [start]) + inside + ([after[0]] if after else [end])
    return max((b - a for a, b in zip(points, points[1:], strict=False)), default=0.0)


def first_batch_started_after(batches: list[BatchRecord], t: float) -> float | None:
    """Completion time of the earliest-completed batch that started at or after `t` (None if none has yet).

    A batch's start is its completion `time` minus its `batch_duration_ms`.
    """
    done = [b.time for b in batches if b.started >= t]
    return min(done) if done else None


class LocalBackend(Backend):
    """Spark standalone on this machine: fog nodes as budgeted workers, the job through its scaling hook."""

    # A move is one change: the live strategy adds the new executor (warmed) before it removes the old one and
    # waits once for the first batch after both; the restart strategy restarts the job once, not twice.
    moves_add_first = True

    def __init__(self, fleet: Fleet, job: TestbedJob, latency_map: LatencyMap, *, strategy: str = "live",
                 control_period_s: float = 10.0, input_end: Any = None, settle_timeout_s: float = 120.0,
                 warm: bool = True, wan: Any = None, schedule: bool = True,
                 events: EventSchedule | None = None) -> None:
        if strategy not in STRATEGIES:
            raise UserError(f"unknown strategy {strategy!r}; use one of: {', '.join(STRATEGIES)}")
        missing = [n for n in fleet.names if n not in latency_map.nodes]
        if missing:
            raise UserError(f"nodes {', '.join(missing)} are not in the latency map {latency_map.source}")
        self.fleet = fleet
        self.job = job
        self.latency_map = latency_map
        # the network as measured (`follow_network`); None: ND_max is read from the operator's map
        self.measured_network: Callable[[float], LatencyMap] | None = None
        self.strategy = strategy
        self.period_s = control_period_s
        self.settle_timeout_s = settle_timeout_s
        self.warm = warm
        self.wan = wan  # gesscale.testbed.wan.TestbedWan: its health is checked every period
        self.site = wan.site if wan is not None else None  # broker and driver: `model_latency: site` measures from it
        # t = 0 of the latency map's `changes:` and the run's fog events (`--events`) on this run; `schedule` False:
        # a helper backend (the demo's capacity probe) that must not start the run's clock
        self.started_s = time.time()
        if wan is not None and schedule:
            wan.follow_schedule(self.started_s)
        self._input_end = input_end or self._broker_input_end
        self.log = BatchLog(job)
        self.reconfigurations: list[Reconfiguration] = []  # as measured: strategy, started_s, took_s, effective_s
        self.stop_event = threading.Event()
        self._stopped = False
        self._last_t = self._last_wall = time.time()
        self._last_end = self._input_end()
        self._last_cpu = {n: fleet.cpu_seconds(n) for n in fleet.names}
        self.log.poll()
        # Node events: the schedule says who may be chosen; the driver kills and removes at the events' times.
        self.schedule = events if events is not None and not events.empty else None
        self._apply_lock = threading.RLock()  # an apply, or a drained node's removal, at a time
        self._node_lock = threading.Lock()
        self._out: set[str] = set()  # nodes killed or gone, until back or joined
        self._lost: list[str] = []  # replicas lost since the last observation
        self._placed: set[str] = set()  # the placement as last known (observed or applied)
        # nodes a reconfiguration removed, until one adds them again: Spark may list their executor a while longer
        # (a partitioned one until its network timeout), and they are neither placed nor lost
        self._removed: set[str] = set()
        self._node_states: list[NodeState] = []
        self.node_events: NodeEventDriver | None = None
        if self.schedule is not None:
            self._placed = set(self.current().nodes)
        if self.schedule is not None and schedule:
            self.node_events = NodeEventDriver(
                node_actions(self.schedule, fleet.names), self.node_event, self.started_s,
                record=fleet.run_dir / RECORD_FILE, cancelled=lambda: self._stopped or self.fleet.closed).start()

    # -- helpers ------------------------------------------------------------------------------------------
    def _broker_input_end(self) -> int:
        from jobs.kafka_io import end_offsets

        topic = self.job.settings.input
        return sum(end_offsets(self.job.settings.bootstrap, [topic])[topic].values())

    def now_s(self) -> float:
        """Seconds since the testbed started (shared by every controller attached to it)."""
        return time.time() - self.fleet.state.t0

    def follow_network(self, seen: Callable[[float], LatencyMap]) -> None:
        """Label ND_max (of the placement observed and of each reconfiguration's record) from `seen(now_s())`,
        the network as measured (`LatencyMonitor.seen`, with `--latency-source measured|both`), instead of the
        operator's map: after a link degraded without the map saying so, the model's points carry the ND_max
        their replicas ran with."""
        self.measured_network = seen

    def nd_max(self, nodes: Iterable[str]) -> float:
        """ND_max of `nodes` as the backend knows it now: measured when it follows the network, else the map's."""
        lmap = self.latency_map if self.measured_network is None else self.measured_network(self.now_s())
        return lmap.nd_max(nodes)

    # -- Backend interface --------------------------------------------------------------------------------
    def run_time_s(self) -> float:
        """Seconds since the run's t = 0 (`started_s`: the clock of the map's `changes:` and the run's events)."""
        return time.time() - self.started_s

    def nodes(self) -> list[NodeState]:
        """Every fog node; without node events all are schedulable. With them, as the schedule says at this
        second (crashed, gone, not yet joined: not ready; leaving, or cut off by a partition or a flap's down
        phase: cordoned, `_cut_off`), and a node killed or gone stays not ready until the driver has brought it
        back. The same objects while nothing changes."""
        if self.schedule is None:
            return [NodeState(n) for n in self.fleet.names]
        t = self.run_time_s()
        with self._node_lock:
            out = set(self._out)
        down = self.schedule.down_pairs(t)
        cut = self._cut_off(down) if down else set()
        states = []
        for n in self.fleet.names:
            state = self.schedule.node_state(n, t)
            states.append(NodeState(n, ready=state in (UP, LEAVING) and n not in out,
                                    cordoned=state == LEAVING or n in cut))
        if states != self._node_states:
            self._node_states = states
        return list(self._node_states)

    def _cut_off(self, down: set[frozenset[str]]) -> set[str]:
        """Fog nodes with a link in `down` to a replica that serves (the placement as last known, less the replicas
        cut off from the others: `events.serving_set`, as in the simulator) or to the site of the driver and the
        broker: a replica placed there could not work with the others, nor be reached by the driver."""
        with self._node_lock:
            placed = [n for n in self.fleet.names if n in self._placed]
        reach = set(serving_set(placed, down)[0])
        if self.wan is not None:
            reach.add(self.wan.site)
        return {n for pair in down for n in pair
                if n in self.fleet.state.nodes and any(o != n and o in reach for o in pair)}

    def out_nodes(self) -> frozenset[str]:
        """The nodes out now: killed by a crash or gone (a leave's end, absent before a join), until the driver
        has brought them back (the latency monitor probes none of their links: `LatencyMonitor.out`)."""
        with self._node_lock:
            return frozenset(self._out)

    def executors(self) -> list[dict[str, Any]]:
        """The job's active executors (empty while the job restarts)."""
        return self._listed() or []

    def _listed(self) -> list[dict[str, Any]] | None:
        """The job's active executors; None when the job cannot say (restarting, its hook not answering)."""
        try:
            return list(self.job.hook.executors()["executors"])
        except UserError:
            return None

    def current(self) -> Placement:
        """Nodes hosting an executor of the job now."""
        return self._placement_of(self.executors())

    def _placement_of(self, executors: list[dict[str, Any]]) -> Placement:
        hosts = {e["host"] for e in executors}
        with self._node_lock:
            out = set(self._out)  # a killed node's executor may be listed until Spark drops it
        nodes = tuple(n for n in self.fleet.names if self.fleet.host_of(n) in hosts and n not in out)
        return Placement(nodes, self.nd_max(nodes))

    def _declared_lost(self, placement: Placement, executors: list[dict[str, Any]]) -> list[str]:
        """Replicas Spark dropped on its own: nodes of the placement as last known (`_placed`: what Spark listed
        after the last observation or reconfiguration, so never an executor still starting) whose executor is no
        longer active, that no node event took out (`_out`: those are listed by the event) and that no
        reconfiguration removed (`_removed`). A partitioned node's executor is such a replica once
        Spark's network timeout has passed (docs/events.md, "A partitioned replica"). Each is listed as lost
        (`Observation.lost`), the job's executor target goes down to the executors active (else Spark would
        launch the lost one again on the next free worker: the node's own once the partition heals), the
        node's worker is stopped with whatever it still runs behind the partition, as in a scale-down, so that
        nothing comes back outside the placement."""
        with self._node_lock:
            dropped = [n for n in self.fleet.names if n in self._placed and n not in placement.nodes
                       and n not in self._out]
            self._placed.difference_update(dropped)
            self._lost.extend(dropped)
        if not dropped:
            return []
        log.warning("Spark no longer lists the executor of %s, which no event or reconfiguration removed: "
                    "replica lost (a partition past spark.network.timeout?)", ", ".join(dropped))
        hosts = {self.fleet.host_of(n) for n in placement.nodes}
        survivors = sum(e["host"] in hosts for e in executors)
        try:
            self.job.hook.set_target(survivors)
        except UserError as err:  # the job restarting: its start sets the count anyway
            log.warning("could not lower the executor target to %d: %s", survivors, err)
        for node in dropped:
            try:
                self.fleet.stop_worker(node)
            except (OSError, UserError) as err:  # the loss is listed whatever: the period is not lost with it
                log.warning("could not stop the worker of %s: %s", node, err)
        return dropped

    def observe(self) -> Observation:
        """Wait for the end of the period, then summarise it (see the module docstring).

        The period is stretched to the first micro-batch completed after its nominal end (by at most two
        periods, or, while records wait and no batch completed at all, until one does), so each period spans
        whole batches: with batches about as long as the period, a fixed window would see 0, 1 or 2 of them and
        report a throughput of 0 or twice the truth. Not after a node event took replicas away: the period ends
        at its nominal end and lists them (`lost`).
        """
        deadline = self._last_t + self.period_s
        while not self.stop_event.is_set() and (left := deadline - time.time()) > 0:
            self.stop_event.wait(min(left, 0.5))
        limit = deadline + 2 * self.period_s
        hard_limit = deadline + self.settle_timeout_s
        t1 = None
        while t1 is None:
            self.log.poll()
            done = [b.time for b in self.log.batches if b.time > self._last_t]
            if done and max(done) >= deadline - 0.5 * self.period_s:
                t1 = max(done)
            elif self._lost:  # a node event took replicas away: the loop replaces them now, not after a batch
                t1 = time.time()  # (with the only replica lost, no batch completes before the replacement)
            elif self._input_end() <= self.log.processed:
                t1 = time.time()  # nothing waits to be processed: no batch is coming to end the period
            elif self.stop_event.is_set() or time.time() >= hard_limit:
                t1 = time.time()
            elif time.time() >= limit and done:
                t1 = max(done)
            else:
                self.stop_event.wait(0.5)
        t0, self._last_t = self._last_t, t1
        period = max(t1 - t0, 1e-6)
        batches = [b for b in self.log.batches if t0 < b.time <= t1]
        wall = time.time()
        end = self._input_end()
        arrived, self._last_end = end - self._last_end, end
        input_period, self._last_wall = max(wall - self._last_wall, 1e-6), wall
        with self._apply_lock:  # not halfway through a node event's removal (the executors listed would be partial)
            executors = self._listed()
            placement = self._placement_of(executors or [])
            # Only under partitions or flaps: that is when Spark drops an executor on its own. Elsewhere an empty
            # list is a job restarting (its executors registering again), and nothing must be declared lost.
            if executors is not None and self.schedule is not None and self.schedule.cuts_links:
                self._declared_lost(placement, executors)
        cpu_now = {n: self.fleet.cpu_seconds(n) for n in self.fleet.names}
        used = sum(cpu_now[n] - self._last_cpu.get(n, 0.0) for n in placement.nodes)
        budget = sum(self.fleet.state.nodes[n].cores for n in placement.nodes) * period
        self._last_cpu = cpu_now
        extra: dict[str, Any] = {"processed_total": self.log.processed, "input_total": end}
        if self.wan is not None and (problem := self.wan.health()) is not None:
            # Never let a period pass as emulated when it was not: restart the daemon and say so in the period.
            extra["wan_restarted_s"] = self.wan.restart(problem)
            extra["wan_problem"] = problem
        with self._node_lock:
            lost, self._lost = tuple(self._lost), []
            out = set(self._out)
        if out & set(placement.nodes):  # a node killed since the placement was read: it is lost, not a replica
            kept = tuple(n for n in placement.nodes if n not in out)
            placement = Placement(kept, self.nd_max(kept))
        with self._node_lock:
            if executors is not None:
                self._placed = set(placement.nodes) - self._out - self._removed
        obs = observation_from_batches(
            batches,
            time_s=self.now_s(),
            period_s=period,
            replicas=placement.nodes,
            nd_max_ms=placement.nd_max_ms,
            offsets=InputOffsets(end=end, arrived=arrived, elapsed_s=input_period, processed=self.log.processed),
            cpu=min(1.0, used / budget) if budget > 0 else None,
            extra=extra,
        )
        return replace(obs, lost=lost) if lost else obs

    @property
    def finished(self) -> bool:
        """True once `stop()` was called (the run's owner decides when the stream is over)."""
        return self._stopped

    def stop(self) -> None:
        """End the run: `finished` becomes true and a waiting `observe` returns at once."""
        self._stopped = True
        self.stop_event.set()
        if self.node_events is not None:
            self.node_events.stop(timeout_s=0.0)

    def apply(self, placement: Placement, instant: bool = False) -> float:
        """Make executors run on exactly `placement.nodes`; returns the measured pause (s). `NodeUnavailable` (and
        nothing changed) when it adds a node that is not schedulable now (a node event since the decision)."""
        with self._apply_lock:
            try:
                return self._apply(placement)
            finally:  # what Spark lists now, also after a failed change: an executor still starting is not in it
                now = set(self.current().nodes)
                with self._node_lock:
                    self._placed = now - self._out - self._removed

    def _apply(self, placement: Placement) -> float:
        before = self.current().nodes
        want = tuple(placement.nodes)
        add, remove = placement.changes_from(before)
        if not add and not remove:
            return 0.0
        unknown = [n for n in add if n not in self.fleet.state.nodes]
        if unknown:
            raise UserError(f"cannot place on unknown node(s) {', '.join(unknown)}")
        if self.schedule is not None:
            free = {n.name for n in self.nodes() if n.schedulable}
            taken = [n for n in add if n not in free]
            if taken:
                raise NodeUnavailable(f"cannot place on {', '.join(taken)}: not schedulable now (node event)")
        with self._node_lock:
            self._removed.difference_update(add)
            self._removed.update(remove)
        t_start = time.time()
        if self.strategy == "live":  # add first, then remove: a move never drops capacity (`moves_add_first`)
            for node in add:
                self._live_add(node)
            for node in remove:
                self._live_remove(node)
        else:
            self._restart(want, add, remove)
        t_end = time.time()
        pause = self._measure_pause(t_start, t_end)
        # The next period observes the new configuration only.
        self._last_t = self._last_wall = time.time()
        self._last_end = self._input_end()
        self._last_cpu = {n: self.fleet.cpu_seconds(n) for n in self.fleet.names}
        self.log.poll()
        kind = "move" if add and remove else "up" if len(want) > len(before) else "down"
        started = t_start - self.fleet.state.t0
        rec = Reconfiguration(time_s=started, kind=kind, added=tuple(add), removed=tuple(remove), nodes=want,
                              nd_max_ms=self.nd_max(want), pause_s=pause, strategy=self.strategy,
                              started_s=started, took_s=t_end - t_start,
                              effective_s=time.time() - self.fleet.state.t0)
        self.reconfigurations.append(rec)
        log.info("%s %s: +%s -%s -> %s, ND_max %.1f ms, pause %.1f s", self.strategy, kind, add, remove, want,
                 rec.nd_max_ms, pause)
        return pause

    # -- node events (gesscale.testbed.node_events) ---------------------------------------------------------
    def node_event(self, action: NodeAction) -> dict[str, Any]:
        """Act out one node event now; returns what was done (the run's record of it)."""
        node = action.node
        if action.action == "crash":
            return self._crash(node)
        if action.action in ("drained", "absent"):
            return self._remove_gone(node)
        if action.action in ("back", "join"):
            assert self.schedule is not None
            state = self.schedule.node_state(node, self.run_time_s())
            if state in (DOWN, GONE):  # another event holds it out (a later crash, a leave)
                return {"schedulable": False, "state": state}
            with self._node_lock:
                self._out.discard(node)
            return {"schedulable": state == UP}
        return {"schedulable": False}  # cordon: `nodes()` says so from the schedule

    def _crash(self, node: str) -> dict[str, Any]:
        """Kill the node and everything on it at once; a replica it held is lost, and the job's executor target
        goes down to the survivors (Spark would otherwise relaunch it on the next free worker)."""
        t0 = time.time()
        with self._node_lock:
            self._out.add(node)
            held = node in self._placed
            self._placed.discard(node)
        killed = self.fleet.kill_worker(node)
        out: dict[str, Any] = {"held_replica": held, "killed_pids": len(killed), "kill_s": round(time.time() - t0, 3)}
        if not held:
            return out
        with self._node_lock:
            self._lost.append(node)
        out["lost"] = [node]
        host = self.fleet.host_of(node)
        try:
            survivors = [e for e in self.job.hook.executors()["executors"] if e["host"] != host]
            reply = self.job.hook.set_target(len(survivors), wait_s=LOSS_WAIT_S)
        except UserError as err:  # the job restarting: its start sets the count anyway
            out["target_error"] = str(err)
            return out
        out["target"] = len(survivors)
        # when Spark's active list no longer had the executor (it saw the connection close), after the kill
        out["executor_gone_s" if reply.get("reached") else "executor_listed_after_s"] = round(time.time() - t0, 3)
        return out

    def _remove_gone(self, node: str) -> dict[str, Any]:
        """A leave's drain is over (or the node is absent before its join): a replica still on it is removed as
        in a scale-down, and is lost to the controller; its worker is stopped."""
        with self._apply_lock:  # never in the middle of a reconfiguration: it moves the replica off first
            held = node in self.current().nodes
            with self._node_lock:
                self._out.add(node)
            t0 = time.time()
            if held and self.strategy == "live":
                self._live_remove(node)
            elif held:
                self._restart(tuple(n for n in self.current().nodes if n != node), [], [node])
            else:
                self.fleet.stop_worker(node)
            with self._node_lock:
                self._placed.discard(node)
                if held:
                    self._lost.append(node)
        out: dict[str, Any] = {"held_replica": held, "removed_s": round(time.time() - t0, 3)}
        if held:
            out["lost"] = [node]
        return out

    # -- strategies -----------------------------------------------------------------------------------------
    def _live_add(self, node: str) -> None:
        hook = self.job.hook
        host = self.fleet.host_of(node)
        self.fleet.start_worker(node)
        try:
            result = hook.add(host=host, wait_s=self.settle_timeout_s, warm=self.warm,
                              warm_timeout_s=self.settle_timeout_s)
        except HookError as err:
            raise UserError(f"adding an executor on {node} ({host}) failed: {err}") from err
        if not result.get("on_requested_host"):
            raise UserError(f"no executor came up on {node} ({host}) within {self.settle_timeout_s:.0f} s")
        warmed = result.get("warm")
        if warmed is not None and warmed.get("ok"):
            log.info("executor on %s warmed up in %.1f s before the stream used it", node, warmed.get("warm_s", 0.0))
        elif warmed is not None:
            log.warning("warm-up of the executor on %s failed: %s", node, warmed.get("error"))

    def _live_remove(self, node: str) -> None:
        host = self.fleet.host_of(node)
        ids = [e["id"] for e in self.executors() if e["host"] == host]
        if ids:
            self.job.hook.remove(ids, wait_s=30.0)
        self.fleet.stop_worker(node)

    def _restart(self, want: tuple[str, ...], add: list[str], remove: list[str]) -> None:
        self.job.stop()
        for node in remove:
            self.fleet.stop_worker(node)
        for node in add:
            self.fleet.start_worker(node)
        self.job.start(len(want))
        self.fleet.state.extra["job"] = self.job.settings.to_dict()
        self.fleet.save()
        self.job.wait_ready(len(want), timeout_s=self.settle_timeout_s + 60)

    def _measure_pause(self, t_start: float, t_end: float) -> float:
        """Wait until the new configuration has completed a micro-batch, then the longest gap around the change.

        The change counts as effective once a batch that *started* after it completed: a batch already running
        when an executor registers finishes on the old executors, while the next one also runs on the new
        executor and waits for its cold start (JVM code generation, Python workers), which is part of the
        reconfiguration's cost and stalls the whole micro-batch.
        """
        deadline = time.time() + self.settle_timeout_s
        settled: float | None = None
        while time.time() < deadline and not self.stop_event.is_set():
            self.log.poll()
            settled = first_batch_started_after(self.log.batches, t_end)
            if settled is not None:
                break
            if self._input_end() <= self.log.processed:
                # Nothing is waiting to be processed (the input is idle): the change delayed no record.
                return 0.0
            time.sleep(0.5)
        times = [b.time for b in self.log.batches]
        if settled is None:
            # No batch yet: the pause lasts at least until now (a lower bound, reported as such in the log).
            log.warning("no micro-batch of the new configuration completed within %.0f s", self.settle_timeout_s)
            return longest_gap(times, t_start, time.time())
        return longest_gap(times, t_start, settled)
