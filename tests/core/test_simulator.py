"""The fluid simulator: backlog, pauses, catch-up, determinism (DESIGN §4)."""

from __future__ import annotations

import numpy as np
import pytest

from gesscale.backends.sim import SimBackend
from gesscale.observation import Placement
from gesscale.scenario import scenario_from_dict
from gesscale.simulate import run_once


def scenario(workload: dict, **op: float) -> object:
    return scenario_from_dict({
        "name": "tiny",
        "control_period_s": 10,
        "cluster": {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 100}, "b": {"c": 90}},
                    "max_replicas": 3},
        "operator": {"alpha": 100, "beta": 1.0, "gamma": 0.5, "noise": 0.0, "reconfig_pause_s": 20,
                     "initial_replicas": 1, **op},
        "workload": workload,
    })


def test_backlog_accumulates_and_catch_up_runs_at_mst() -> None:
    sim = SimBackend(scenario({"kind": "steps", "levels": [150, 50, 50, 50], "step_s": 10}))  # type: ignore[arg-type]
    o1 = sim.observe()          # 150/s into MST 100: +50/s for 10 s
    assert o1.throughput == pytest.approx(100.0)
    assert o1.backlog == pytest.approx(500.0) and o1.bp_upstream == 1.0
    o2 = sim.observe()          # 50/s in, MST 100: backlog shrinks by 50/s -> 0 after 10 s
    assert o2.throughput == pytest.approx(100.0) and o2.backlog == pytest.approx(0.0)
    assert o2.backlog_growth == pytest.approx(-500.0)
    o3 = sim.observe()
    assert o3.bp_upstream == 0.0 and o3.cpu == pytest.approx(0.5, abs=0.05)


def test_pause_stops_processing_then_new_capacity_applies() -> None:
    sim = SimBackend(scenario({"kind": "steps", "levels": [80] * 6, "step_s": 10}))  # type: ignore[arg-type]
    sim.observe()
    pause = sim.apply(Placement(("a", "b"), 10.0))
    assert pause == 20.0
    o = sim.observe()
    assert o.throughput == 0.0 and o.paused_s == 10 and o.backlog == pytest.approx(800)
    sim.observe()
    o = sim.observe()           # MST(2 @ 10 ms) = 200 - 5 = 195 catches up the 1600 backlog
    assert o.throughput == pytest.approx(195.0) and o.backlog == pytest.approx(1600 + 800 - 1950)
    # b started (smallest RTT sum), a joins
    assert sim.reconfigurations[0].kind == "up" and sim.reconfigurations[0].added == ("a",)


def test_instant_apply_has_no_pause_and_demand_uses_best_placement() -> None:
    sim = SimBackend(scenario({"kind": "steps", "levels": [90, 180, 290], "step_s": 10}))  # type: ignore[arg-type]
    assert sim.apply(Placement(("a", "b"), 10.0), instant=True) == 0.0
    # best MST: n=1 100, n=2 195 (a,b), n=3 300 - 50 = 250 -> 290/s cannot be sustained: capped at n_max.
    d = sim.demand()
    assert d[5] == 1 and d[19] == 2 and d[29] == 3


def test_runs_are_deterministic_per_seed_and_differ_across_seeds() -> None:
    sc = scenario({"kind": "cosine", "mean": 150, "amplitude": 100, "period_s": 600, "noise": 0.1,
                   "duration_s": 1800}, noise=0.05)
    a = run_once(sc, "gesscale", 3)  # type: ignore[arg-type]
    b = run_once(sc, "gesscale", 3)  # type: ignore[arg-type]
    c = run_once(sc, "gesscale", 4)  # type: ignore[arg-type]
    assert a.metrics == b.metrics and np.array_equal(a.supply, b.supply)
    assert not np.array_equal(a.input, c.input)


def test_everything_is_processed_in_the_end() -> None:
    sc = scenario({"kind": "steps", "levels": [250, 50], "step_s": 300})
    r = run_once(sc, "thr-nlaware", 1)  # type: ignore[arg-type]
    assert r.processed.sum() == pytest.approx(r.input.sum())
    assert r.backlog[-1] < 1.0
