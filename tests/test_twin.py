"""The simulated twin of a live run (gesscale/twin.py), built from the shortened live demo recorded in tests/data
(the periods the loop observed and the two reconfigurations the local backend measured; see tests/test_observe.py):
it carries the run's measured effective delays, observation gaps, achieved period and input, the simulator plays
them back, and no decision of the run changes it."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest

from gesscale.latency_map import load_latency_map
from gesscale.observation import Placement
from gesscale.scenario import scenario_from_dict
from gesscale.sim_backend import SimBackend
from gesscale.twin import build_twin, input_per_second, measured_changes

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
PERIODS = [json.loads(line) for line in (DATA / "live_demo_periods.jsonl").read_text().splitlines()]
RECONFIGURATIONS = [json.loads(line) for line in (DATA / "live_demo_reconfigurations.jsonl").read_text().splitlines()]
LMAP = load_latency_map(ROOT / "inventory" / "latency" / "fog9.yaml").subset(["fog1", "fog2", "fog3"])
MODEL = {"fitted": True, "form": "paper", "alpha": 406.0, "beta": 0.8, "gamma": 1.0, "delta": 0.0,
         "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 406.0, "predicted": 406.0},
                          {"n": 2, "nd_max_ms": 8.7, "mst": 690.0, "predicted": 698.0}]}


def _twin(periods: list[dict] = PERIODS, reconfigurations: list[dict] = RECONFIGURATIONS) -> tuple[dict, dict]:
    return build_twin(periods, reconfigurations, MODEL, LMAP.to_dict(), 3, 10.0, 5.0)


def _observed_gap(start: float) -> float:
    """In the recorded periods: from the last observation before a change started to the first one after it."""
    times = [p["time_s"] for p in PERIODS]
    return min(t for t in times if t > start) - max(t for t in times if t <= start)


def test_the_twin_carries_the_recorded_effective_delays_and_observation_gaps() -> None:
    scenario, measured = _twin()
    up, down = RECONFIGURATIONS
    reconfig = scenario["operator"]["reconfig"]
    for kind, rec in (("up", up), ("down", down)):
        assert reconfig[kind]["effective_s"] == pytest.approx(rec["effective_s"] - rec["started_s"], abs=1e-3)
        assert reconfig[kind]["pause_s"] == pytest.approx(rec["pause_s"], abs=1e-3)
        assert reconfig[kind]["observation_gap_s"] == pytest.approx(_observed_gap(rec["started_s"]), abs=1e-3)
    # 40.9 s from the up-scale's start to the first batch of two replicas, against a 7.3 s pause; 45.9 s unobserved
    assert reconfig["up"]["effective_s"] == pytest.approx(40.9) and reconfig["up"]["observation_gap_s"] > 45
    assert [c["kind"] for c in measured["changes"]] == ["up", "down"]


def test_the_simulator_plays_the_twins_delays_and_gaps_back() -> None:
    sc = scenario_from_dict(_twin()[0], "twin")
    sim = SimBackend(sc)
    before_up = sim.observe()
    sim.apply(Placement(("fog1", "fog2"), LMAP.nd_max(("fog1", "fog2"))))
    after_up = sim.observe()
    sim.apply(Placement(("fog1",), 0.0))
    after_down = sim.observe()
    up, down = sim.reconfigurations
    assert up.effective_s - up.started_s == 41 and down.effective_s - down.started_s == 9  # 40.9, 8.6 s, in seconds
    # the gaps 45.9 and 13.7 s between observations; each reports the seconds since the change was effective only
    assert (after_up.time_s - before_up.time_s, after_down.time_s - after_up.time_s) == (46, 14)
    assert (after_up.period_s, after_down.period_s) == (5, 5)
    assert (up.pause_s, down.pause_s) == (7, 5)


def test_the_twin_runs_at_the_period_achieved_with_the_input_the_topic_received() -> None:
    scenario, measured = _twin()
    times = [p["time_s"] for p in PERIODS]
    spans = [b - a for a, b in zip(times, times[1:], strict=False)
             if not any(a < r["started_s"] <= b for r in RECONFIGURATIONS)]
    assert len(spans) == 18 and scenario["control_period_s"] == pytest.approx(statistics.median(spans), abs=1e-3)
    assert 2.5 < scenario["control_period_s"] < 3.5  # not the 5 s configured: periods end on a micro-batch
    levels = scenario["workload"]["levels"]
    first = PERIODS[0]
    topic = PERIODS[-1]["extra"]["input_total"] - first["extra"]["input_total"]
    assert sum(levels) == pytest.approx(topic + first["input_rate"] * first["period_s"], abs=1.0)
    assert measured["input"]["seconds"] == len(levels) == 122  # until the topic's end offset stopped growing
    assert scenario["operator"]["alpha"] == MODEL["alpha"] and scenario["operator"]["initial_replicas"] == 1
    scenario_from_dict(scenario, "twin")  # a valid scenario


def test_the_twin_reads_no_decision_of_the_run() -> None:
    decided = copy.deepcopy(RECONFIGURATIONS)
    for r in decided:  # every field the decision set: when, why, which nodes, how
        r.update(time_s=r["time_s"] + 30.0, reason="something else", nodes=["fog3", "fog9"], added=["fog9"],
                 removed=["fog3"], nd_max_ms=99.0, strategy="restart", took_s=0.1)
    periods = [p | {"decision": "a different reason"} for p in PERIODS]
    assert _twin(periods, decided) == _twin()


def test_a_changes_direction_is_the_change_of_the_replicas_observed() -> None:
    n_at = [(109.5, 1), (191.5, 2), (1e9, 1)]
    periods = [p | {"replicas": ["fog1", "fog2"][: next(n for t, n in n_at if p["time_s"] < t)]} for p in PERIODS]
    swapped = [r | {"kind": "down" if r["kind"] == "up" else "up"} for r in RECONFIGURATIONS]
    assert [c.kind for c in measured_changes(periods, swapped)] == ["up", "down"]


def test_a_change_a_live_backend_did_not_time_is_left_out_and_no_period_is_no_input() -> None:
    assert measured_changes(PERIODS, [{"kind": "up", "pause_s": 3.0}]) == []
    assert input_per_second([]) == (0.0, [])
    scenario, measured = build_twin([], [], None, LMAP.to_dict(), 3, None, 5.0)
    assert scenario["control_period_s"] == 5.0 and "reconfig" not in scenario["operator"]
    scenario_from_dict(scenario, "twin")


def test_with_the_input_topics_append_times_the_input_follows_them_second_by_second() -> None:
    from gesscale.twin import arrivals_per_second

    t0 = PERIODS[0]["time_s"] - PERIODS[0]["period_s"]  # 90.78: second 90 is the twin's first
    arrivals = {"from_s": 88, "counts": [5, 0, 3, 7, 0, 9, 0, 0]}  # 8 records appended before t0 wait at its start
    assert arrivals_per_second(arrivals, t0) == [8.0, 7.0, 0.0, 9.0]  # the trailing seconds without input left out
    scenario, measured = build_twin(PERIODS, RECONFIGURATIONS, MODEL, LMAP.to_dict(), 3, 10.0, 5.0, arrivals)
    assert scenario["workload"]["levels"] == [8.0, 7.0, 0.0, 9.0] and measured["input"]["records"] == 24
    assert measured["input"]["source"].startswith("input records' append times")
    assert _twin()[1]["input"]["source"].startswith("input topic end offsets")


LIVE_TABLE3 = json.loads((DATA / "live_table3_runs.json").read_text())
LMAP_RHINE = load_latency_map(ROOT / LIVE_TABLE3["latency_map"])


def _recorded_twin(rid: str) -> tuple[dict, dict]:
    run = LIVE_TABLE3["runs"][rid]
    lmap = load_latency_map(ROOT / LIVE_TABLE3["latency_map"])
    return build_twin(run["periods"], run["reconfigurations"], run["model"], lmap.to_dict(), run["max_replicas"],
                      run["warmup_s"], run["control_period_s"], run["arrivals"])


def test_the_twin_starts_with_the_cold_first_period_the_run_measured() -> None:
    # gesscale-plus-b1's first period, before any decision: 6.5 s, 8.7 records/s, 2,955 records waiting at its end
    scenario, measured = _recorded_twin("gesscale-plus-b1")
    first = LIVE_TABLE3["runs"]["gesscale-plus-b1"]["periods"][0]
    assert scenario["operator"]["cold_start"] == {"seconds": 6, "rate": pytest.approx(first["throughput"], abs=1e-3)}
    assert measured["cold_start"] == scenario["operator"]["cold_start"]
    assert scenario["input_end_known"] is False and scenario["after_drain"] == {"periods": 3, "max_periods": 8}
    sim = SimBackend(scenario_from_dict(scenario, "twin"))
    obs = sim.observe()
    assert obs.time_s == 6.0 and obs.throughput <= first["throughput"] + 1e-9 and obs.bp_upstream == 0.0
    # a first period without records waiting at its end measured the input, not a cold start
    quiet = [PERIODS[0] | {"backlog": 0.0}, *PERIODS[1:]]
    assert "cold_start" not in _twin(quiet)[0]["operator"]


def test_a_fit_the_runs_processed_records_contradict_gives_way_to_the_capacity_it_showed() -> None:
    # gesscale-plus-b1 fitted MST(1) = 10.8/s on that cold period alone, then processed 87,006 records in the 229.6 s
    # gap of its 1 -> 6 scale-up (one replica serving for the 219.6 s until it was effective, six for 10 s)
    scenario, measured = _recorded_twin("gesscale-plus-b1")
    run = LIVE_TABLE3["runs"]["gesscale-plus-b1"]
    a, b = run["periods"][0], run["periods"][1]
    change = measured_changes(run["periods"], run["reconfigurations"])[0]
    after = b["time_s"] - change.started_s - change.delay_s
    replica_s = (change.started_s - a["time_s"]) + change.delay_s + 6 * after
    shown = (b["extra"]["processed_total"] - a["extra"]["processed_total"]) / replica_s
    assert run["model"]["alpha"] == pytest.approx(10.81, abs=0.01) and shown == pytest.approx(311, abs=1)
    assert scenario["operator"]["alpha"] == pytest.approx(shown, abs=1e-3) and scenario["operator"]["beta"] == 1.0
    assert measured["mst_fit_used"] is False and measured["capacity_shown"] == pytest.approx(shown, abs=1e-3)
    # a fit the records agree with stays: the recorded demo (MST(1) = 406/s)
    kept, built_from = _twin()
    assert kept["operator"]["alpha"] == MODEL["alpha"] and built_from["mst_fit_used"] is True


def test_the_twins_cpu_is_what_the_busy_periods_reported_at_each_size() -> None:
    # thr-nlunaware-b1's busy periods: one at two replicas (CPU 100 %), three at three (88 %, 85 %, 100 %, busy
    # 1.0): the threshold policy reads that CPU, where the simulator's was the busy fraction (99-100 %)
    from gesscale.scenario import CpuShare

    scenario, _ = _recorded_twin("thr-nlunaware-b1")
    periods = LIVE_TABLE3["runs"]["thr-nlunaware-b1"]["periods"]
    at3 = [min(1.0, p["cpu"] / p["busy"]) for p in periods if len(p["replicas"]) == 3 and p["busy"] >= 0.9]
    assert len(at3) == 3
    cpu = CpuShare(**scenario["operator"]["cpu"])
    assert cpu.of(2) == pytest.approx(1.0, abs=1e-3)
    assert cpu.of(3) == pytest.approx(statistics.geometric_mean(at3), abs=1e-3)
    assert 0.02 <= cpu.noise <= 0.3
    # without busy periods, nothing is calibrated: the simulator's CPU stays the busy fraction
    assert "cpu" not in _twin([p | {"busy": 0.5} for p in PERIODS])[0]["operator"]


def test_a_changes_delay_is_per_node_added_or_removed() -> None:
    # gesscale-plus-b1 went 1 -> 6 at once: the local backend added the five executors one after the other,
    # effective 219.6 s after the decision (43.9 s a node; one node took 33-54 s in the other runs), next observed
    # 229.6 s after it; back to one at the end, 6.8 s (no observation after it tells how many it removed)
    scenario, measured = _recorded_twin("gesscale-plus-b1")
    up, down = measured_changes(LIVE_TABLE3["runs"]["gesscale-plus-b1"]["periods"],
                                LIVE_TABLE3["runs"]["gesscale-plus-b1"]["reconfigurations"])
    assert (up.nodes, down.nodes) == (5, None)
    timing = scenario["operator"]["reconfig"]["up"]
    assert timing["per_node"] is True and timing["effective_s"] == pytest.approx(up.delay_s / 5, abs=1e-3)
    assert scenario["operator"]["reconfig"]["down"]["per_node"] is False  # per change, as measured
    sim = SimBackend(scenario_from_dict(scenario, "twin"))
    start = sim.observe()
    names = list(LMAP_RHINE.names)
    sim.apply(Placement(tuple(names[:6]), LMAP_RHINE.nd_max(tuple(names[:6]))))
    after = sim.observe()
    six = sim.reconfigurations[-1]
    assert six.effective_s - six.started_s == round(up.delay_s)  # five nodes: 5 x 43.9 s
    assert after.time_s - start.time_s == round(up.gap_s)
    sim.apply(Placement(tuple(names[:2]), LMAP_RHINE.nd_max(tuple(names[:2]))))
    assert sim.reconfigurations[-1].effective_s - sim.reconfigurations[-1].started_s == round(down.delay_s)


MOVE = [json.loads(line) for line in (DATA / "live_move_periods.jsonl").read_text().splitlines()]
MOVE_RECONFIGURATIONS = [json.loads(line) for line in
                         (DATA / "live_move_reconfigurations.jsonl").read_text().splitlines()]
MOVE_MODEL = json.loads((DATA / "live_move_model.json").read_text())
RHINE6 = load_latency_map(ROOT / "inventory" / "latency" / "rhine6.yaml")


def test_a_recorded_live_move_is_the_twins_move_timing_and_the_simulator_moves_in_one_change() -> None:
    # tests/data/live_move_*: issue 32's degradation run on 31dedd1 (the testbed moved fog1 -> fog2 in one change,
    # added and warmed first: 51.7 s from its start to the first batch of fog3+fog2)
    (move,) = MOVE_RECONFIGURATIONS
    scenario, measured = build_twin(MOVE, MOVE_RECONFIGURATIONS, MOVE_MODEL, RHINE6.to_dict(), 4, 10.0, 10.0,
                                    min_replicas=2)
    timing = scenario["operator"]["reconfig"]
    assert list(timing) == ["move"] and [c["kind"] for c in measured["changes"]] == ["move"]
    assert timing["move"]["effective_s"] == pytest.approx(move["effective_s"] - move["started_s"], abs=1e-3)
    assert timing["move"]["per_node"] is False
    sim = SimBackend(scenario_from_dict(scenario, "twin"))
    assert sim.moves_add_first and set(sim.current().nodes) == {"fog1", "fog3"}
    sim.observe()
    sim.apply(Placement(("fog3", "fog2"), RHINE6.nd_max(("fog3", "fog2"))))
    (played,) = sim.reconfigurations
    assert played.kind == "move" and played.effective_s - played.started_s == round(timing["move"]["effective_s"])
    # without a measured move (a twin of a run before moves were one change), two changes as before
    scenario["operator"].pop("reconfig")
    assert not SimBackend(scenario_from_dict(scenario, "twin")).moves_add_first
