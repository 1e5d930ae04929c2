"""The fluid simulator: backlog, pauses, catch-up, determinism (docs/controller.md, Simulator)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gesscale.observation import Placement
from gesscale.scenario import load_scenario, scenario_from_dict
from gesscale.sim_backend import SimBackend
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


def _changing(changes: list[dict], workload: dict) -> object:
    return scenario_from_dict({
        "name": "changing",
        "control_period_s": 10,
        "cluster": {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 100}, "b": {"c": 90}},
                    "changes": changes, "max_replicas": 3},
        "operator": {"alpha": 100, "beta": 1.0, "gamma": 0.5, "noise": 0.0, "reconfig_pause_s": 20,
                     "initial_replicas": 2},
        "workload": workload,
    })


def test_nd_max_and_true_mst_follow_a_change_mid_period() -> None:
    # Initial replicas b, a (10 ms): MST 200 - 5 = 195. From t = 15 the pair is 50 ms: MST 200 - 25 = 175.
    sc = _changing([{"t_s": 15, "pair": ["a", "b"], "rtt_ms": 50}], {"kind": "steps", "levels": [400] * 3,
                                                                     "step_s": 10})
    sim = SimBackend(sc)  # type: ignore[arg-type]
    o1 = sim.observe()
    assert o1.nd_max_ms == 10 and o1.throughput == pytest.approx(195.0)
    o2 = sim.observe()  # 5 s at 195 then 5 s at 175
    assert o2.nd_max_ms == 50 and o2.throughput == pytest.approx((5 * 195 + 5 * 175) / 10)
    o3 = sim.observe()
    assert o3.throughput == pytest.approx(175.0) and sim.current().nd_max_ms == 50


def test_ideal_demand_uses_the_map_in_force_each_second() -> None:
    # 190/s: two replicas suffice on (a, b) at 10 ms (200 - 5 = 195) until node a is 100 ms further from both.
    sc = _changing([{"t_s": 20, "node": "a", "add_rtt_ms": 100}], {"kind": "steps", "levels": [190] * 4,
                                                                   "step_s": 10})
    d = SimBackend(sc).demand()  # type: ignore[arg-type]
    # After the change the best pair is (b, c) at 90 ms: 200 - 45 = 155 < 190, while three replicas (ND_max
    # a-c = 200 ms) give 300 - 100 = 200: demand rises from 2 to 3 at t = 20.
    assert list(d[:20]) == [2] * 20 and list(d[20:40]) == [3] * 20


def test_policies_see_the_map_in_force() -> None:
    from gesscale.mape import ControlLoop
    from gesscale.policies.base import make_policy
    from gesscale.simulate import controller_config

    sc = _changing([{"t_s": 25, "pair": ["a", "b"], "rtt_ms": 95}], {"kind": "steps", "levels": [50] * 5,
                                                                     "step_s": 10})
    lmap = sc.latency_map  # type: ignore[attr-defined]
    loop = ControlLoop(SimBackend(sc), make_policy("static"), lmap, controller_config(sc, 1),  # type: ignore[arg-type]
                       network=lmap.at)
    seen = []
    for _ in range(4):
        loop.step()
        seen.append(loop.context(loop.history[-1].observation.time_s).graph["a"]["b"]["weight"])
    assert seen == [10, 10, 95, 95]
    fixed = ControlLoop(SimBackend(sc), make_policy("static"), lmap, controller_config(sc, 1))  # type: ignore[arg-type]
    fixed.run(max_steps=4)
    assert fixed.graph["a"]["b"]["weight"] == 10  # without `network`, the map given stays in force


def test_gesscale_moves_away_from_a_fog_site_that_degrades() -> None:
    root = Path(__file__).resolve().parents[1]
    degraded = load_scenario(root / "scenarios/network/pi10-taxi-degraded.yaml")
    t_change = degraded.latency_map.change_times[0]

    def placements(sc: object) -> list[tuple[float, tuple[str, ...], tuple[str, ...]]]:
        r = run_once(sc, "gesscale", 1, keep_history=True)  # type: ignore[arg-type]
        return [(h.observation.time_s, h.reconfiguration.added, h.reconfiguration.nodes)
                for h in r.history if h.applied and h.reconfiguration is not None]

    runs = placements(degraded)
    before = [nodes for t, _, nodes in runs if t < t_change]
    after = [(added, nodes) for t, added, nodes in runs if t >= t_change]
    assert "pi03" in before[-1]  # the site is in use when it degrades
    assert all("pi03" not in added for added, _ in after)  # never chosen again
    assert any("pi03" not in nodes for _, nodes in after)  # and left at a reconfiguration
    assert "pi03" not in after[-1][1]
    # On pi10-taxi (same nodes, RTTs, ground truth and day, no change) it keeps coming back to pi03.
    steady = placements(load_scenario(root / "scenarios/pi10-taxi.yaml"))
    assert any("pi03" in added for t, added, _ in steady if t >= t_change)


def test_a_measured_effective_delay_serves_the_old_configuration_then_pauses() -> None:
    # the twin of a live run: an up-scale serves with the old replica for 25 s, pauses 5 s, then the new one serves
    sim = SimBackend(scenario({"kind": "steps", "levels": [80] * 10, "step_s": 10},  # type: ignore[arg-type]
                              reconfig={"up": {"effective_s": 30, "pause_s": 5}}))
    sim.observe()
    assert sim.apply(Placement(("a", "b"), 10.0)) == 5.0
    o = sim.observe()  # the next observation ends 30 s + one period after the decision: none during the change
    assert o.time_s == 50 and o.period_s == 10  # it reports the new configuration only, as the live backend's
    assert o.paused_s == 0 and o.throughput == pytest.approx((400 + 10 * 80) / 10)  # the pause's 400 caught up
    served = sim.processed[10:50]
    assert list(served[:25]) == [80.0] * 25          # MST(1) = 100 takes the 80/s input
    assert list(served[25:30]) == [0.0] * 5          # the pause: the last seconds before it is effective
    assert served[30] == pytest.approx(195.0)  # MST(2 @ 10 ms) = 195 catches up the pause's 400 records
    assert list(sim.supply[10:50]) == [2] * 40       # the new replica is held from the decision
    r = sim.reconfigurations[0]
    assert (r.started_s, r.effective_s, r.pause_s) == (10.0, 40.0, 5.0)


def test_a_measured_observation_gap_and_a_scale_down_at_the_smaller_capacity() -> None:
    sim = SimBackend(scenario({"kind": "steps", "levels": [150] * 10, "step_s": 10},  # type: ignore[arg-type]
                              initial_replicas=2,
                              reconfig={"down": {"effective_s": 8, "pause_s": 2, "observation_gap_s": 13}}))
    sim.observe()
    sim.apply(Placement(("b",), 0.0))
    o = sim.observe()
    assert o.time_s == 23 and o.period_s == 5  # 13 s after the decision; the 5 s since the change was effective
    assert list(sim.processed[10:16]) == [100.0] * 6  # a scale-down serves with what is left (MST(1) = 100)
    assert list(sim.processed[16:18]) == [0.0, 0.0]
    assert sim.observe().period_s == 10  # then the control period again


def test_an_up_kind_given_leaves_the_other_kind_on_the_paper_pause() -> None:
    sim = SimBackend(scenario({"kind": "steps", "levels": [80] * 6, "step_s": 10},  # type: ignore[arg-type]
                              initial_replicas=2, reconfig={"up": {"effective_s": 30}}))
    sim.observe()
    assert sim.apply(Placement(("b",), 0.0)) == 20.0
    o = sim.observe()
    assert o.period_s == 10 and o.throughput == 0.0


@pytest.mark.parametrize(("timing", "says"), [
    ({"up": {"effective_s": 5, "pause_s": 10}}, "pause_s 10 is longer than effective_s 5"),
    ({"up": {"effective_s": 30, "observation_gap_s": 20}}, "observation_gap_s"),
    ({"sideways": {"effective_s": 3}}, "unknown key 'sideways'"),
    ({"up": {"effective": 3}}, "unknown key 'effective'"),
    ({"up": 3}, "must be a mapping"),
])
def test_a_wrong_reconfiguration_timing_is_one_clear_error(timing: dict, says: str) -> None:
    from gesscale.errors import UserError

    with pytest.raises(UserError, match=says):
        scenario({"kind": "steps", "levels": [80], "step_s": 10}, reconfig=timing)  # type: ignore[arg-type]


def test_after_a_change_with_a_measured_timing_the_warm_up_runs_from_when_it_took_effect() -> None:
    # as the live runner: a decision 30 s after the change took effect is still in a 35 s warm-up, though 70 s
    # have passed since the decision
    sc = scenario_from_dict({
        "name": "tiny", "control_period_s": 10, "warmup_s": 35,
        "cluster": {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 100}, "b": {"c": 90}},
                    "max_replicas": 3},
        "operator": {"alpha": 100, "beta": 1.0, "gamma": 0.0, "noise": 0.0, "initial_replicas": 1,
                     "reconfig": {"up": {"effective_s": 40, "pause_s": 5, "observation_gap_s": 50}}},
        "workload": {"kind": "steps", "levels": [400] * 20, "step_s": 10},
    })
    result = run_once(sc, "thr-nlaware", 1, keep_history=True)
    first = next(i for i, h in enumerate(result.history) if h.applied)
    t = result.history[first].observation.time_s
    after = [h for h in result.history[first + 1:] if h.observation.time_s - t <= 70]
    assert [h.observation.time_s - t for h in after] == [50, 60, 70]
    assert all(not h.applied for h in after)  # 10, 20 and 30 s after it took effect (at +40): warming up


def test_a_cold_start_caps_the_first_seconds_and_signals_no_back_pressure() -> None:
    # a twin of a live run: its first period, before any decision, processed 8 records/s for 6 s
    sim = SimBackend(scenario({"kind": "steps", "levels": [50], "step_s": 60},  # type: ignore[arg-type]
                              cold_start={"seconds": 6, "rate": 8.0}))
    first = sim.observe()
    assert first.time_s == 6.0 and first.throughput == pytest.approx(8.0)
    assert first.backlog == pytest.approx(6 * 42.0) and first.bp_upstream == 0.0 and first.busy == pytest.approx(1.0)
    second = sim.observe()  # warm from then on: MST 100 catches the 252 records up, one control period
    assert second.period_s == 10.0 and second.throughput == pytest.approx(50.0 + 252.0 / 10)
    assert second.backlog == pytest.approx(0.0) and second.bp_upstream > 0.0


def test_a_controller_not_told_the_input_end_gets_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import gesscale.simulate as simulate

    told: list[float | None] = []

    class Spy(simulate.ControlLoop):
        def __init__(self, *args: object, **kwargs: object) -> None:
            told.append(kwargs.get("input_end_s"))  # type: ignore[arg-type]
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(simulate, "ControlLoop", Spy)
    sc = scenario({"kind": "steps", "levels": [50], "step_s": 60})
    run_once(sc, "thr-nlunaware", 1)  # type: ignore[arg-type]
    from dataclasses import replace
    run_once(replace(sc, input_end_known=False), "thr-nlunaware", 1)  # type: ignore[arg-type]
    assert told == [60.0, None]


def test_a_measured_cpu_share_is_what_a_busy_period_reports() -> None:
    # the live testbed: a saturated job at three replicas reported 0.87-0.89 CPU (busy 1.0), under the threshold
    # policies' 90 %; the simulator's CPU is the busy fraction unless the operator's measured share says otherwise
    saturated = {"kind": "steps", "levels": [400], "step_s": 60}
    share = {"share": 1.0, "exponent": -0.2, "noise": 0.0}  # 2^-0.2 = 0.87 at two replicas
    a = SimBackend(scenario(saturated, initial_replicas=2)).observe()  # type: ignore[arg-type]
    b = SimBackend(scenario(saturated, initial_replicas=2, cpu=share)).observe()  # type: ignore[arg-type]
    assert a.busy == pytest.approx(1.0) and b.busy == pytest.approx(1.0)
    assert a.cpu > 0.95 and b.cpu == pytest.approx(2 ** -0.2)
    plain = run_once(scenario(saturated, initial_replicas=2), "thr-nlunaware", 1)  # type: ignore[arg-type]
    measured = run_once(scenario(saturated, initial_replicas=2, cpu=share), "thr-nlunaware", 1)  # type: ignore[arg-type]
    assert plain.supply.max() == 3 and measured.supply.max() == 2  # scaled up on a busy CPU; never over 90 %
