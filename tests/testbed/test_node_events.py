"""Node events on the local testbed without Spark (gesscale/testbed/node_events.py, backend.py, fleet.py;
docs/events.md): the actions a schedule calls for, the driver that acts them out on the run's clock, what the
backend does for each (who is schedulable, the replica lost and listed once, the executor target lowered), the
control loop replacing a crashed node's replica through the backend, and a crash killing a real process group.

The fleet and the job's hook are stand-ins (a Spark worker and the driver's API need services); the schedule, the
driver, the backend's logic, the control loop and `Fleet.kill_worker` on real processes are the real ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.events import EventSchedule, parse_event
from gesscale.latency_map import latency_map_from_dict
from gesscale.mape import ControlLoop
from gesscale.observation import Decision, Observation, Placement
from gesscale.policies.base import Policy, PolicyContext
from gesscale.process import group_members
from gesscale.testbed.backend import LocalBackend, NodeUnavailable
from gesscale.testbed.controller import fog_events, node_event_lines, node_schedule
from gesscale.testbed.fleet import Fleet, FleetState, FogNode
from gesscale.testbed.node_events import NodeAction, NodeEventDriver, node_actions, replacement_times

NODES = ["fog1", "fog2", "fog3"]
MAP = {"nodes": {n: {} for n in NODES}, "rtt_ms": {"fog1": {"fog2": 2, "fog3": 5}, "fog2": {"fog3": 4}}}


def schedule(*entries: dict[str, Any]) -> EventSchedule:
    nodes = {n: {} for n in NODES}
    return EventSchedule([parse_event(e, nodes, f"events[{k}]") for k, e in enumerate(entries)], NODES)


class FakeHook:
    """The driver's scaling hook as the backend uses it: the executor listing, the target, add and remove."""

    def __init__(self, hosts: list[str]) -> None:
        self.listed = [{"id": str(k), "host": h} for k, h in enumerate(hosts)]
        self.targets: list[int] = []
        self.removed: list[list[str]] = []

    def executors(self) -> dict[str, Any]:
        return {"executors": list(self.listed)}

    def set_target(self, target: int, wait_s: float = 0.0) -> dict[str, Any]:
        self.targets.append(target)
        return {"target": target, "reached": len(self.listed) == target}

    def add(self, host: str, wait_s: float, warm: bool, warm_timeout_s: float) -> dict[str, Any]:
        self.listed.append({"id": str(100 + len(self.listed)), "host": host})
        return {"on_requested_host": True}

    def remove(self, ids: list[str], wait_s: float = 30.0) -> dict[str, Any]:
        self.removed.append(ids)
        self.listed = [e for e in self.listed if e["id"] not in ids]
        return {"removed": ids}


class FakeFleet:
    """The part of a Fleet the backend uses: nodes at 127.0.0.3K, running workers, kills and stops recorded."""

    def __init__(self, run_dir: Path, running: list[str]) -> None:
        self.run_dir = run_dir
        self.names = list(NODES)
        self.state = SimpleNamespace(t0=time.time(), extra={},
                                     nodes={n: SimpleNamespace(cores=0.25, host=self.host_of(n)) for n in NODES})
        self.workers = set(running)
        self.killed: list[str] = []
        self.stopped: list[str] = []
        self.closed = False

    def host_of(self, name: str) -> str:
        return f"127.0.0.3{name[-1]}"

    def cpu_seconds(self, name: str) -> float:
        return 0.0

    def worker_running(self, name: str) -> bool:
        return name in self.workers

    def start_worker(self, name: str) -> int:
        self.workers.add(name)
        return 1

    def kill_worker(self, name: str) -> list[int]:
        self.killed.append(name)
        self.workers.discard(name)
        return [1, 2, 3]

    def stop_worker(self, name: str) -> None:
        self.stopped.append(name)
        self.workers.discard(name)

    def save(self) -> None:
        pass


def backend(tmp_path: Path, events: EventSchedule | None, running: list[str], *, run_s: float = 0.0,
            drive: bool = False, waiting: int = 0, settle_s: float = 120.0
            ) -> tuple[LocalBackend, FakeFleet, FakeHook]:
    """A LocalBackend on the stand-ins whose run started `run_s` seconds ago; `drive`: with its event thread."""
    fleet = FakeFleet(tmp_path, running)
    hook = FakeHook([fleet.host_of(n) for n in running])
    batches = tmp_path / "batches.jsonl"
    batches.write_text("")
    job = SimpleNamespace(batches_path=batches, hook=hook, settings=SimpleNamespace(input="rides"))
    be = LocalBackend(fleet, job, latency_map_from_dict(MAP), control_period_s=0.01,  # type: ignore[arg-type]
                      input_end=lambda: waiting, events=events, schedule=drive, settle_timeout_s=settle_s)
    if run_s:
        be.started_s = time.time() - run_s
    return be, fleet, hook


def ready(be: LocalBackend) -> dict[str, bool]:
    return {n.name: n.schedulable for n in be.nodes()}


# -- the actions a schedule calls for -------------------------------------------------------------------------
def test_each_node_event_becomes_its_actions_in_time_order() -> None:
    sched = schedule({"t_s": 30, "event": "crash", "node": "fog2", "duration_s": 60},
                     {"t_s": 40, "event": "crash", "node": "fog1"},
                     {"t_s": 50, "event": "leave", "node": "fog3", "drain_s": 20},
                     {"t_s": 45, "event": "partition", "pairs": [["fog1", "fog2"]]})
    got = [(a.t_s, a.action, a.node) for a in node_actions(sched, NODES)]
    assert got == [(30, "crash", "fog2"), (40, "crash", "fog1"), (50, "cordon", "fog3"), (70, "drained", "fog3"),
                   (90, "back", "fog2")]  # a crash without duration never comes back; a partition is not a node's


def test_a_node_that_joins_is_absent_from_the_start_and_other_nodes_events_are_left_out() -> None:
    sched = schedule({"t_s": 20, "event": "join", "node": "fog3"}, {"t_s": 5, "event": "crash", "node": "fog2"})
    assert [(a.t_s, a.action, a.node) for a in node_actions(sched, ["fog1", "fog3"])] == [
        (0.0, "absent", "fog3"), (20, "join", "fog3")]


def test_a_churn_gives_its_seeded_crashes_each_with_its_return() -> None:
    churn = {"t_s": 0, "event": "churn", "rate_per_h": 360, "duration_s": 600, "down_s": 30, "seed": 4}
    actions = node_actions(schedule(churn), NODES)
    crashes = [a for a in actions if a.action == "crash"]
    assert crashes and len(actions) == 2 * len(crashes)
    assert [(a.t_s, a.node) for a in crashes] == [(e.t_s, e.nodes[0]) for e in schedule(churn).expanded]
    assert all(any(b.action == "back" and b.node == a.node and b.t_s == a.t_s + 30 for b in actions)
               for a in crashes)


# -- the driver -------------------------------------------------------------------------------------------------
def test_the_driver_applies_every_action_due_records_it_and_goes_on_after_a_failure(tmp_path: Path) -> None:
    done: list[str] = []

    def apply(a: NodeAction) -> dict[str, Any]:
        done.append(f"{a.action} {a.node}")
        if a.node == "fog1":
            raise OSError("no such process")
        return {"lost": [a.node]}

    record = tmp_path / "node-events.jsonl"
    actions = [NodeAction(1.0, "crash", "fog1"), NodeAction(2.0, "crash", "fog2")]
    t0 = time.time() - 10.0  # both are due: late by about 9 and 8 s
    driver = NodeEventDriver(actions, apply, t0, record=record)
    driver.run()
    assert done == ["crash fog1", "crash fog2"]
    first, second = driver.applied
    assert first["error"] == "OSError: no such process" and "lost" not in first
    assert second["lost"] == ["fog2"] and second["t_s"] == 2.0 and 7.5 < second["late_s"] < 60
    assert [json.loads(line)["node"] for line in record.read_text().splitlines()] == ["fog1", "fog2"]


def test_the_driver_stops_before_an_action_once_cancelled_or_stopped(tmp_path: Path) -> None:
    done: list[NodeAction] = []
    gone = NodeEventDriver([NodeAction(0.0, "crash", "fog1")], lambda a: done.append(a) or {}, time.time(),
                           cancelled=lambda: True)
    gone.run()
    stopped = NodeEventDriver([NodeAction(0.0, "crash", "fog1")], lambda a: done.append(a) or {}, time.time())
    stopped.stop()
    stopped.run()
    assert done == [] and gone.applied == stopped.applied == []


def test_the_backend_starts_its_driver_on_the_runs_clock(tmp_path: Path) -> None:
    sched = schedule({"t_s": 3600, "event": "crash", "node": "fog2"})
    be, _, _ = backend(tmp_path, sched, ["fog1"], drive=True)
    # the run's t = 0, the one the WAN emulation's link events count from (`wan.follow_schedule(started_s)`)
    assert be.node_events is not None and be.node_events.t0_unix == be.started_s
    assert [(a.action, a.node) for a in be.node_events.actions] == [("crash", "fog2")]
    be.stop()
    plain, _, _ = backend(tmp_path, None, ["fog1"], drive=True)
    assert plain.node_events is None and plain.schedule is None


# -- the backend's side -----------------------------------------------------------------------------------------
def test_a_crash_kills_the_node_lowers_the_target_and_the_next_observation_lists_its_replica_once(
        tmp_path: Path) -> None:
    sched = schedule({"t_s": 10, "event": "crash", "node": "fog2", "duration_s": 100})
    be, fleet, hook = backend(tmp_path, sched, ["fog1", "fog2"], run_s=5.0)
    assert be.observe().replicas == ("fog1", "fog2") and ready(be) == dict.fromkeys(NODES, True)
    be.started_s = time.time() - 10.0  # the crash is due
    assert ready(be)["fog2"] is False  # the schedule says so before the kill is done
    out = be.node_event(NodeAction(10.0, "crash", "fog2"))
    assert fleet.killed == ["fog2"] and out["held_replica"] and out["lost"] == ["fog2"] and out["killed_pids"] == 3
    assert hook.targets == [1]  # the survivors: Spark must not relaunch it on the next free worker
    assert be.current().nodes == ("fog1",)  # although Spark still lists the dead executor
    obs = be.observe()
    assert obs.lost == ("fog2",) and obs.replicas == ("fog1",) and obs.to_dict()["lost"] == ["fog2"]
    assert be.observe().lost == ()  # reported once
    with pytest.raises(NodeUnavailable, match="fog2: not schedulable now"):
        be.apply(Placement(("fog1", "fog2"), 2.0))
    assert fleet.workers == {"fog1"}  # nothing was started


def test_a_period_with_a_lost_replica_ends_at_its_nominal_end_although_no_batch_completed(tmp_path: Path) -> None:
    # 500 records wait and no batch completes (the only replica crashed): a period is otherwise stretched until a
    # batch completes or settle_timeout_s has passed, which would hold the replacement back that long
    be, _, _ = backend(tmp_path, schedule({"t_s": 0, "event": "crash", "node": "fog1"}), ["fog1"], waiting=500,
                       settle_s=30.0)
    be.node_event(NodeAction(0.0, "crash", "fog1"))
    obs = be.observe()
    assert obs.lost == ("fog1",) and obs.replicas == () and obs.backlog == 500
    assert obs.period_s < 30.0  # ended by the loss, not by the settle timeout


def test_a_crashed_node_is_schedulable_again_once_back_and_not_before(tmp_path: Path) -> None:
    sched = schedule({"t_s": 10, "event": "crash", "node": "fog2", "duration_s": 100},
                     {"t_s": 60, "event": "crash", "node": "fog3", "duration_s": 100})
    be, _, _ = backend(tmp_path, sched, ["fog1", "fog2"], run_s=10.0)
    be.node_event(NodeAction(10.0, "crash", "fog2"))
    be.started_s = time.time() - 110.0
    assert ready(be)["fog2"] is False  # due back by the schedule, but not brought back yet
    assert be.node_event(NodeAction(110.0, "back", "fog2")) == {"schedulable": True}
    assert ready(be) == {"fog1": True, "fog2": True, "fog3": False}
    be.node_event(NodeAction(60.0, "crash", "fog3"))
    be.started_s = time.time() - 120.0  # a back while the schedule still has the node down keeps it out
    assert be.node_event(NodeAction(110.0, "back", "fog3"))["schedulable"] is False


def test_a_crash_of_a_node_without_a_replica_loses_nothing(tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, schedule({"t_s": 0, "event": "crash", "node": "fog3"}), ["fog1"])
    out = be.node_event(NodeAction(0.0, "crash", "fog3"))
    assert out["held_replica"] is False and "lost" not in out and hook.targets == [] and be.observe().lost == ()
    assert fleet.killed == ["fog3"]


def test_a_leave_cordons_then_removes_a_replica_still_there_through_the_backend(tmp_path: Path) -> None:
    sched = schedule({"t_s": 10, "event": "leave", "node": "fog2", "drain_s": 30})
    be, fleet, hook = backend(tmp_path, sched, ["fog1", "fog2"], run_s=20.0)
    state = {n.name: n for n in be.nodes()}["fog2"]
    assert state.ready and state.cordoned  # keeps serving, never chosen
    assert be.node_event(NodeAction(10.0, "cordon", "fog2")) == {"schedulable": False}
    assert be.observe().replicas == ("fog1", "fog2")
    be.started_s = time.time() - 40.0
    out = be.node_event(NodeAction(40.0, "drained", "fog2"))
    assert out["held_replica"] and out["lost"] == ["fog2"]
    assert hook.removed == [["1"]] and fleet.stopped == ["fog2"]  # the scale-down path: executors, then worker
    obs = be.observe()
    assert obs.lost == ("fog2",) and obs.replicas == ("fog1",) and ready(be)["fog2"] is False


def test_a_drained_node_the_controller_already_moved_off_loses_nothing(tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, schedule({"t_s": 0, "event": "leave", "node": "fog2", "drain_s": 5}),
                              ["fog1"], run_s=6.0)
    out = be.node_event(NodeAction(5.0, "drained", "fog2"))
    assert out["held_replica"] is False and hook.removed == [] and be.observe().lost == ()


def test_a_joining_node_is_not_schedulable_before_its_join(tmp_path: Path) -> None:
    sched = schedule({"t_s": 30, "event": "join", "node": "fog3"})
    be, _, _ = backend(tmp_path, sched, ["fog1"], run_s=1.0)
    assert ready(be) == {"fog1": True, "fog2": True, "fog3": False}
    with pytest.raises(NodeUnavailable):
        be.apply(Placement(("fog1", "fog3"), 5.0))
    be.node_event(NodeAction(0.0, "absent", "fog3"))
    be.started_s = time.time() - 30.0
    assert be.node_event(NodeAction(30.0, "join", "fog3")) == {"schedulable": True}
    assert ready(be)["fog3"] is True


def test_a_node_absent_at_the_start_loses_the_replica_it_was_given(tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, schedule({"t_s": 30, "event": "join", "node": "fog1"}), ["fog1"])
    assert be.node_event(NodeAction(0.0, "absent", "fog1"))["lost"] == ["fog1"]
    assert be.observe().lost == ("fog1",) and fleet.stopped == ["fog1"]


# -- a replica Spark declared lost on its own (a partition past spark.network.timeout) ----------------------------
PARTITION = {"t_s": 10, "event": "partition", "pairs": [["fog1", "fog2"]], "duration_s": 300}


def drop(hook: FakeHook, fleet: FakeFleet, node: str) -> None:
    """Spark's driver drops the node's executor (its heartbeats stopped for spark.network.timeout)."""
    hook.listed = [e for e in hook.listed if e["host"] != fleet.host_of(node)]


def test_an_executor_spark_declared_lost_is_listed_once_its_target_lowered_and_its_worker_stopped(
        tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, schedule(PARTITION), ["fog1", "fog2"], run_s=5.0)
    assert be.observe().replicas == ("fog1", "fog2")
    be.started_s = time.time() - 140.0  # fog2 cut off from fog1 since 10 s: Spark gave up on its executor
    drop(hook, fleet, "fog2")
    obs = be.observe()
    assert obs.lost == ("fog2",) and obs.replicas == ("fog1",)
    assert hook.targets == [1]  # Spark must not launch it again on a free worker (fog2's own, once healed)
    assert fleet.stopped == ["fog2"] and fleet.workers == {"fog1"}  # nothing comes back by itself
    assert be.observe().lost == ()  # reported once


def test_no_replica_is_declared_lost_that_the_backend_removed_never_saw_start_or_could_not_list(
        tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, schedule(PARTITION), ["fog1", "fog2"])  # its cut starts at t = 10 s
    assert be.observe().replicas == ("fog1", "fog2")
    be.apply(Placement(("fog1",), 0.0))  # the controller's scale-down
    stale = {"id": "1", "host": fleet.host_of("fog2")}
    hook.listed.append(stale)  # Spark still lists the removed executor (its kill cannot reach it: partitioned)
    assert be.observe().lost == ()
    drop(hook, fleet, "fog2")  # then drops it
    assert be.observe().lost == () and hook.targets == [] and fleet.stopped == ["fog2"]

    def slow_add(host: str, wait_s: float, warm: bool, warm_timeout_s: float) -> dict[str, Any]:
        return {"on_requested_host": False}  # the executor on fog3 still starting when the add gave up

    hook.add = slow_add  # type: ignore[method-assign]
    with pytest.raises(UserError, match="no executor came up on fog3"):
        be.apply(Placement(("fog1", "fog3"), 5.0))
    assert be.observe().lost == ()

    def unlisted() -> dict[str, Any]:
        raise UserError("the driver does not answer")

    listing = hook.executors
    hook.executors = unlisted  # type: ignore[method-assign]
    assert be.observe().lost == ()  # nothing is known lost when Spark cannot list its executors
    hook.executors = listing  # type: ignore[method-assign]
    drop(hook, fleet, "fog1")
    assert be.observe().lost == ("fog1",)  # the placement known before the failed listing still counts


@pytest.mark.parametrize("events", [None, schedule({"t_s": 0, "event": "crash", "node": "fog3"})])
def test_without_a_partition_or_a_flap_an_executor_gone_from_the_listing_is_not_declared_lost(
        tmp_path: Path, events: EventSchedule | None) -> None:
    """A job restarting (its driver back, its executors not yet registered) lists none: that is no loss, and the
    nodes' workers must stay, or the restarted job would find no worker to run on."""
    be, fleet, hook = backend(tmp_path, events, ["fog1", "fog2"])
    assert be.observe().replicas == ("fog1", "fog2")
    hook.listed = []
    assert be.observe().lost == () and fleet.stopped == [] and hook.targets == []


def test_a_crashed_or_drained_replica_is_listed_by_its_event_only(tmp_path: Path) -> None:
    sched = schedule({"t_s": 0, "event": "crash", "node": "fog2"},
                     {"t_s": 0, "event": "leave", "node": "fog3", "drain_s": 5})
    be, fleet, hook = backend(tmp_path, sched, ["fog1", "fog2", "fog3"], run_s=6.0)
    be.node_event(NodeAction(0.0, "crash", "fog2"))
    be.node_event(NodeAction(5.0, "drained", "fog3"))
    drop(hook, fleet, "fog2")  # Spark drops the killed executor too
    assert be.observe().lost == ("fog2", "fog3") and be.observe().lost == ()


def test_a_node_cut_off_from_a_serving_replica_or_the_site_is_cordoned_until_the_link_heals(tmp_path: Path) -> None:
    nodes = {n: {} for n in [*NODES, "hq"]}
    sched = EventSchedule([parse_event(PARTITION, nodes, "events[0]"),
                           parse_event({"t_s": 20, "event": "partition", "pairs": [["fog3", "hq"]], "duration_s": 30},
                                       nodes, "events[1]")], NODES)
    be, _, _ = backend(tmp_path, sched, ["fog1", "fog2"], run_s=15.0)
    be.wan = SimpleNamespace(site="hq", health=lambda: None)  # the site of the driver and the broker
    be.observe()
    # fog1 and fog2 cannot reach each other: fog1 serves (placed first, as `serving_set` keeps), fog2 is cut off
    assert {n.name: n.cordoned for n in be.nodes()} == {"fog1": False, "fog2": True, "fog3": False}
    be.started_s = time.time() - 25.0  # fog3 cut off from the site: no replica there could reach the driver
    assert {n.name: n.cordoned for n in be.nodes()} == {"fog1": False, "fog2": True, "fog3": True}
    be.started_s = time.time() - 400.0  # both healed
    assert all(n.schedulable for n in be.nodes())


# -- the control loop on it: the simulator's contract --------------------------------------------------------------
class Keep(Policy):
    """Keeps the replica count: whatever changes is the loop's doing."""

    id = "keep-test"

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        return Decision(obs.n, "keep")


def test_the_control_loop_replaces_a_crashed_replica_through_the_backend(tmp_path: Path) -> None:
    sched = schedule({"t_s": 10, "event": "crash", "node": "fog2"})
    be, fleet, hook = backend(tmp_path, sched, ["fog1", "fog2"], run_s=5.0)
    config = ControllerConfig(control_period_s=10, warmup_s=0, max_replicas=3)
    loop = ControlLoop(be, Keep(), latency_map_from_dict(MAP), config)
    assert loop.step().reconfiguration is None
    be.started_s = time.time() - 10.0
    be.node_event(NodeAction(10.0, "crash", "fog2"))
    rec = loop.step()
    assert rec.observation.lost == ("fog2",)
    assert rec.reconfiguration is not None and rec.applied
    assert rec.reconfiguration.kind == "up" and rec.reconfiguration.added == ("fog3",)
    assert rec.reconfiguration.reason == "replace 1 lost replica(s) (fog2)"
    assert fleet.workers == {"fog1", "fog3"} and be.current().nodes == ("fog1", "fog3")
    assert hook.targets == [1]  # lowered to the survivor at the crash, before the replacement's add
    assert loop.step().reconfiguration is None  # replaced once


def test_the_time_until_lost_capacity_is_replaced_comes_from_the_records() -> None:
    t0 = 1000.0
    applied = [{"t_s": 90, "action": "crash", "node": "fog1", "at": t0 + 130.0, "late_s": 0.01, "lost": ["fog1"],
                "killed_pids": 7, "kill_s": 0.2},
               {"t_s": 95, "action": "crash", "node": "fog3", "at": t0 + 135.0, "late_s": 0.01, "killed_pids": 0,
                "kill_s": 0.0}]
    reconfigs = [{"time_s": 120.0, "kind": "up", "added": ["fog2"], "reason": "scale up"},
                 {"time_s": 140.0, "kind": "up", "added": ["fog4"], "reason": "replace 1 lost replica(s) (fog1)",
                  "effective_s": 171.5}]
    assert replacement_times(applied, reconfigs, t0) == [
        {"node": "fog1", "action": "crash", "lost_s": 130.0, "replaced_by": ["fog4"], "decided_s": 140.0,
         "effective_s": 171.5, "replaced_after_s": 41.5}]
    lines = node_event_lines(applied, reconfigs, t0)
    assert "replaced by fog4 (effective 41.5 s after the loss)" in lines[0] and "lost" not in lines[1]
    assert replacement_times(applied, reconfigs[:1], t0)[0]["replaced_after_s"] is None


def test_the_demo_prints_each_node_event_with_the_time_its_lost_replica_took_to_replace(capsys) -> None:  # noqa: ANN001
    from gesscale.cli.cmd_demo import _print_report

    t0 = 1000.0
    applied = [{"t_s": 90, "action": "crash", "node": "fog1", "at": t0 + 130.0, "late_s": 0.01, "lost": ["fog1"],
                "killed_pids": 7, "kill_s": 0.2}]
    reconfigs = [{"time_s": None, "kind": "up", "added": ["fog2"], "removed": [], "nodes": ["fog1", "fog2"],
                  "nd_max_ms": 2.0, "pause_s": 1.0, "reason": "replace? no: a record without its time"},
                 {"time_s": 140.0, "kind": "up", "added": ["fog3"], "removed": [], "nodes": ["fog2", "fog3"],
                  "nd_max_ms": 4.0, "pause_s": 1.0, "reason": "replace 1 lost replica(s) (fog1)", "effective_s": 171.5}]
    _print_report({"produced": 10, "processed": 10, "lost": 0, "duplicated": 0, "dead_letters": 0,
                   "reconfigurations": reconfigs, "model": None, "timeline_png": "t.png", "simulation": {},
                   "timings_s": {"total": 1.0}, "options": {"policy": "gesscale"},
                   "network": {"node_events_applied": applied, "testbed_t0_unix": t0}})
    out = " ".join(capsys.readouterr().out.split())
    assert ("node event: crash fog1 due at t=90 s of the run, applied at 130.0 s on the controller's clock "
            "(+0.010 s): 7 process(es) killed in 0.2 s; its replica lost, replaced by fog3 (effective 41.5 s after "
            "the loss)") in out


def test_a_run_with_wan_applies_the_node_events_and_warns_of_none(tmp_path: Path) -> None:
    lmap = latency_map_from_dict(MAP, "m.yaml")
    events = tmp_path / "ev.yaml"
    events.write_text(json.dumps([{"t_s": 10, "event": "crash", "node": "fog2"}]))
    fog, note = fog_events(lmap, events, owned=True, wan=True, command="run")
    sched = node_schedule(fog, owned=True, wan=True)
    assert note is None and sched is not None and sched.node_state("fog2", 11) == "down"
    assert node_schedule(fog, owned=False, wan=True) is None and node_schedule(lmap, owned=True, wan=True) is None


# -- a crash on real processes ------------------------------------------------------------------------------------
def test_a_crash_kills_the_workers_whole_process_group_at_once(tmp_path: Path) -> None:
    host = "127.0.0.32"
    # a stand-in worker: a group leader whose command line names the Spark class and its host, with a child that
    # ignores SIGTERM (a crash sends none: SIGKILL at once)
    code = "import signal,subprocess,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           "subprocess.Popen(['sleep', '300']); time.sleep(300)"
    worker = subprocess.Popen([sys.executable, "-c", code, "deploy.worker.Worker", host], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(group_members(worker.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(group_members(worker.pid)) == 2, "the stand-in worker did not start its child"
        state = FleetState(os.getpid(), time.time(), "spark://127.0.0.1:1", None,
                           {"fog2": FogNode("fog2", host, 15101, 15201, 0.25)}, {"fog2": worker.pid})
        fleet = Fleet(tmp_path, state, SimpleNamespace(budgets={}))  # type: ignore[arg-type]
        try:
            killed = fleet.kill_worker("fog2")
        finally:
            fleet._stop_watch.set()
        assert worker.pid in killed
        worker.wait(5)  # reaped by kill_worker already, or now
        assert group_members(worker.pid) == [] and "fog2" not in fleet.state.workers  # the child too
        assert json.loads((tmp_path / "testbed.json").read_text())["workers"] == {}
        assert fleet.kill_worker("fog2") == []  # no worker: nothing to kill
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, 9)
            worker.wait(5)


def test_a_crash_also_kills_what_left_the_workers_group_but_is_in_the_nodes_network_group(tmp_path: Path) -> None:
    # PySpark's daemon makes a process group of its own; the node's groups still hold it. A stand-in for the
    # network group's `cgroup.procs` lists it (no cgroup is made here).
    host = "127.0.0.32"
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "deploy.worker.Worker", host],
                              start_new_session=True)
    escaped = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        (tmp_path / "groups" / "fog2").mkdir(parents=True)
        (tmp_path / "groups" / "fog2" / "cgroup.procs").write_text(f"{worker.pid}\n{escaped.pid}\n")
        state = FleetState(os.getpid(), time.time(), "spark://127.0.0.1:1", None,
                           {"fog2": FogNode("fog2", host, 15101, 15201, 0.25)}, {"fog2": worker.pid},
                           {"net_groups": str(tmp_path / "groups")})
        fleet = Fleet(tmp_path, state, SimpleNamespace(budgets={}))  # type: ignore[arg-type]
        try:
            killed = fleet.kill_worker("fog2", timeout_s=0.5)  # the stand-in file never empties: bounded
        finally:
            fleet._stop_watch.set()
        assert escaped.pid in killed and escaped.wait(5) == -9
    finally:
        for p in (worker, escaped):
            if p.poll() is None:
                p.kill()
                p.wait(5)


def test_the_control_loop_replaces_a_partitioned_replica_once_spark_declared_it_lost_and_not_on_its_node(
        tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, schedule(PARTITION), ["fog1", "fog2"], run_s=5.0)
    config = ControllerConfig(control_period_s=10, warmup_s=0, max_replicas=2)  # no headroom to move off first
    loop = ControlLoop(be, Keep(), latency_map_from_dict(MAP), config)
    assert loop.step().reconfiguration is None
    be.started_s = time.time() - 20.0  # partitioned: Spark still lists fog2's executor, its tasks hang
    rec = loop.step()
    assert rec.observation.replicas == ("fog1", "fog2") and rec.reconfiguration is None
    assert "move off fog2" in rec.decision.reason and "blocked: no headroom" in rec.decision.reason
    be.started_s = time.time() - 140.0  # past spark.network.timeout: the driver dropped the executor
    drop(hook, fleet, "fog2")
    rec = loop.step()
    assert rec.observation.lost == ("fog2",) and rec.reconfiguration is not None and rec.applied
    assert rec.reconfiguration.added == ("fog3",)  # not on fog2: cut off from fog1, cordoned
    assert rec.reconfiguration.reason == "replace 1 lost replica(s) (fog2)"
    assert hook.targets == [1] and fleet.workers == {"fog1", "fog3"} and be.current().nodes == ("fog1", "fog3")
    be.started_s = time.time() - 400.0  # healed: fog2 is a candidate again, and nothing came back by itself
    assert ready(be)["fog2"] is True and loop.step().reconfiguration is None
    assert be.current().nodes == ("fog1", "fog3")


def test_a_move_adds_the_new_executor_before_it_removes_the_old_one_in_one_change(tmp_path: Path) -> None:
    be, fleet, hook = backend(tmp_path, None, ["fog1", "fog2"])
    calls: list[str] = []
    add, remove = hook.add, hook.remove
    hook.add = lambda host, **kw: (calls.append(f"add {host}"), add(host, **kw))[1]  # type: ignore[method-assign]
    hook.remove = lambda ids, **kw: (calls.append(f"remove {ids}"), remove(ids, **kw))[1]  # type: ignore[method-assign]
    be.apply(Placement(("fog1", "fog3"), 5.0))
    assert calls == ["add 127.0.0.33", "remove ['1']"]  # capacity never drops: three executors in between
    assert be.current().nodes == ("fog1", "fog3") and fleet.stopped == ["fog2"]
    assert [r.kind for r in be.reconfigurations] == ["move"] and LocalBackend.moves_add_first
