"""Fog events in the simulator (gesscale/sim_backend.py, docs/events.md): each kind's effect on the replicas, the
node states the controller sees, and a run without effective events unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from gesscale.scenario import scenario_from_dict, with_events
from gesscale.sim_backend import NETWORK_TIMEOUT_S, SimBackend
from gesscale.simulate import run_once

# b starts (smallest RTT sum), a joins it: the replicas are (b, a), ND_max 10 ms, MST(2) = 200 - 5 = 195.
RTT = {"a": {"b": 10, "c": 100, "d": 20}, "b": {"c": 90, "d": 20}, "c": {"d": 90}}


def scenario(events: list[dict] | None = None, levels: int = 150, steps: int = 40, **cluster: object) -> object:
    sc = scenario_from_dict({
        "name": "tiny", "control_period_s": 10,
        "cluster": {"nodes": ["a", "b", "c", "d"], "rtt_ms": RTT, "max_replicas": 4, **cluster},
        "operator": {"alpha": 100, "beta": 1.0, "gamma": 0.5, "noise": 0.0, "reconfig_pause_s": 20,
                     "initial_replicas": 2},
        "workload": {"kind": "steps", "levels": [levels] * steps, "step_s": 10},
    })
    return with_events(sc, events, "ev.yaml") if events else sc


def not_schedulable(sim: SimBackend) -> dict[str, str]:
    return {n.name: ("down" if not n.ready else "cordoned") for n in sim.nodes() if not n.schedulable}


def test_a_crash_loses_the_replica_at_once_and_the_node_returns_after_its_duration() -> None:
    sim = SimBackend(scenario([{"t_s": 15, "event": "crash", "node": "a", "duration_s": 30}]))
    assert sim.current().nodes == ("b", "a")
    first = sim.observe()
    assert first.lost == () and first.throughput == pytest.approx(150)
    o = sim.observe()  # seconds 10-19: a crashes at 15, its replica is gone then, with the recovery pause
    assert o.replicas == ("b",) and o.lost == ("a",) and sim.processed[15] == 0.0
    assert sim.reconfigurations[-1].kind == "lost" and sim.reconfigurations[-1].removed == ("a",)
    assert not_schedulable(sim) == {"a": "down"}
    assert sim.observe().lost == ()  # reported once
    for _ in range(2):
        sim.observe()
    assert not_schedulable(sim) == {} and sim.current().nodes == ("b",)  # back at 45, but not re-added by itself


def test_a_partition_cuts_a_replica_off_and_it_is_lost_after_the_network_timeout() -> None:
    sim = SimBackend(scenario([{"t_s": 10, "event": "partition", "groups": [["a"], ["b", "c", "d"]],
                                "duration_s": 300}], steps=60))
    o = sim.observe()
    o = sim.observe()  # cut off from 10: alive (still a replica) but serving nothing: one replica's MST
    assert o.replicas == ("b", "a") and o.lost == () and o.throughput == pytest.approx(100)
    assert o.nd_max_ms == 0.0 and not_schedulable(sim) == {"a": "cordoned"}
    lost = []
    while sim.t < 10 + NETWORK_TIMEOUT_S + 10:
        lost += sim.observe().lost
    assert lost == ["a"] and sim.current().nodes == ("b",)
    while sim.t < 320:
        sim.observe()
    assert not_schedulable(sim) == {}  # healed: a may be chosen again


def test_a_flap_toggles_the_capacity_without_losing_a_replica_when_shorter_than_the_timeout() -> None:
    sim = SimBackend(scenario([{"t_s": 20, "event": "flap", "pair": ["a", "b"], "period_s": 30, "down_s": 10,
                                "duration_s": 60}], levels=300))
    lost = []
    while sim.t < 100:
        lost += sim.observe().lost
    assert lost == []
    processed = sim.processed[:100]
    # down phases 20-29 and 50-59: one replica serves (MST 100); else both (195)
    assert set(processed[20:30]) == {100.0} and set(processed[50:60]) == {100.0}
    assert set(processed[30:50]) == {195.0} and set(processed[80:100]) == {195.0}


def test_a_leave_drains_then_the_replica_goes_and_a_join_adds_a_candidate() -> None:
    sim = SimBackend(scenario([{"t_s": 0, "event": "join", "node": "c"},  # c is in the cluster from 0 only
                               {"t_s": 12, "event": "leave", "node": "a", "drain_s": 10},
                               {"t_s": 50, "event": "join", "node": "d"}]))
    assert not_schedulable(sim) == {"d": "down"}  # first event of d is its join: absent before
    sim.observe()
    o = sim.observe()  # a leaves at 12: cordoned, keeps serving during its drain
    assert o.replicas == ("b", "a") and o.lost == () and not_schedulable(sim) == {"a": "cordoned", "d": "down"}
    assert set(sim.processed[10:20]) == {150.0}
    o = sim.observe()  # drained at 22: gone
    assert o.replicas == ("b",) and o.lost == ("a",)
    while sim.t < 60:
        sim.observe()
    assert not_schedulable(sim) == {"a": "down"}  # d joined


def test_the_first_placement_avoids_nodes_absent_at_the_start() -> None:
    sim = SimBackend(scenario([{"t_s": 0, "event": "crash", "node": "b"}]))
    assert "b" not in sim.current().nodes


def test_events_that_change_nothing_leave_a_run_as_it_was() -> None:
    plain = run_once(scenario(), "gesscale", seed=3, keep_history=True)
    late = run_once(scenario([{"t_s": 10_000, "event": "crash", "node": "b"}]), "gesscale", seed=3,
                    keep_history=True)
    assert late.metrics == plain.metrics
    for key in ("input", "processed", "backlog", "supply"):
        assert np.array_equal(getattr(late, key), getattr(plain, key))
