"""The simulated twin of a live run with events (gesscale/twin.py, docs/events.md "The twin's decisions against the
run's"): it carries the run's events, re-timed from the run's clock (t = 0 at the day's start) onto its own (t = 0
at the start of the run's first period), and the run's latency source, so that its controller meets the same
degradation or crash at the same instant of the run; the simulator then makes the move or the replacement."""

from __future__ import annotations

import json
import re

import pytest

from gesscale.errors import UserError
from gesscale.latency_map import event_entries, load_latency_map, read_events
from gesscale.scenario import scenario_from_dict
from gesscale.simulate import run_once
from gesscale.twin import build_twin, run_network, twin_events
from tests.test_twin import DATA, LMAP, MODEL, PERIODS, RECONFIGURATIONS, ROOT

LIVE_TABLE3 = json.loads((DATA / "live_table3_runs.json").read_text())
RHINE6 = load_latency_map(ROOT / "inventory" / "latency" / "rhine6.yaml")


def _report(entries: list[dict], day_start_s: float, source: str | None = None) -> dict:
    """What a demo report records of the run's network: the events file's entries, the day's start (the events'
    t = 0) and the testbed's (the periods' clock) in unix seconds, and the controller's latency source."""
    return {"network": {"events": {"file": "ev.yaml", "entries": entries}, "t0_unix": 1_700_000_000.0 + day_start_s,
                        "testbed_t0_unix": 1_700_000_000.0},
            "options": {"controller": {} if source is None else {"latency_source": source}}}


def test_a_link_event_is_at_the_same_instant_of_the_run_in_the_twin_and_only_measuring_sees_it() -> None:
    # the day started 92.5 s into the testbed's clock; fog1's links 60 ms slower 30 s into the day: at 122.5 s
    report = _report([{"t_s": 30.0, "node": "fog1", "add_rtt_ms": 60.0}], 92.5, "measured")
    scenario, measured = build_twin(PERIODS, RECONFIGURATIONS, MODEL, LMAP.to_dict(), 3, 10.0, 5.0,
                                    **run_network(report))
    # the twin's t = 0 is the start of the run's first period: 94.856 - 4.079 s on the testbed's clock
    assert measured["zero_s"] == pytest.approx(PERIODS[0]["time_s"] - PERIODS[0]["period_s"], abs=1e-3)
    [event] = scenario["events"]
    assert event == {"t_s": pytest.approx(122.5 - 90.777, abs=1e-3), "node": "fog1", "add_rtt_ms": 60.0}
    assert measured["zero_s"] + event["t_s"] == pytest.approx(122.5, abs=1e-3)
    assert scenario["controller"] == {"latency_source": "measured"}
    assert "initial_nodes" not in scenario["operator"]  # these recorded periods do not say where replicas were
    sc = scenario_from_dict(scenario, "twin")
    t = event["t_s"]
    assert sc.latency_map.at(t - 0.01).rtt("fog1", "fog2") == LMAP.rtt("fog1", "fog2")
    assert sc.latency_map.at(t).rtt("fog1", "fog2") == pytest.approx(LMAP.rtt("fog1", "fog2") + 60.0)
    # the operator's map (what `--latency-source map` sees) does not say so, as the live controller's did not
    assert sc.latency_map.documented.at(t + 100).rtt("fog1", "fog2") == LMAP.rtt("fog1", "fog2")


def test_a_crash_is_at_the_same_instant_in_the_twin_and_hits_the_node_the_run_used() -> None:
    # thr-nlunaware-b1 of the live Table III: its first period starts 59 s into the testbed's clock, on fog1
    run = LIVE_TABLE3["runs"]["thr-nlunaware-b1"]
    report = _report([{"t_s": 100.0, "event": "crash", "node": "fog1", "duration_s": 120.0}], 3.2)
    scenario, measured = build_twin(run["periods"], run["reconfigurations"], run["model"], RHINE6.to_dict(),
                                    run["max_replicas"], run["warmup_s"], run["control_period_s"], run["arrivals"],
                                    **run_network(report))
    assert measured["zero_s"] == 59.0  # the input counted per whole second of the testbed's clock, from 59
    assert scenario["events"] == [{"t_s": pytest.approx(44.2), "event": "crash", "node": "fog1",
                                   "duration_s": 120.0}]
    assert "controller" not in scenario  # the run's controller followed its map
    sim = run_once(scenario_from_dict(scenario, "twin"), "thr-nlunaware", seed=1, keep_history=True)
    lost = [h for h in sim.history if h.observation.lost]
    assert [h.observation.lost for h in lost] == [("fog1",)]
    crash_s = 103.2 - measured["zero_s"]  # 100 s into the day, 3.2 s after the testbed started
    before = [h for h in sim.history if h.observation.time_s < crash_s]
    assert "fog1" in before[-1].observation.replicas  # the twin started where the run did, on fog1
    assert lost[0].observation.time_s > crash_s and lost[0].reconfiguration.reason.startswith("replace")
    assert "fog1" not in lost[0].reconfiguration.added


def test_events_before_the_twins_start_keep_what_is_left_of_them() -> None:
    entries = [{"t_s": 0.0, "node": "fog1", "add_rtt_ms": 60.0},
               {"t_s": 1.0, "event": "crash", "node": "fog2", "duration_s": 10.0},
               {"t_s": 2.0, "event": "crash", "node": "fog3", "duration_s": 2.0},
               {"t_s": 2.0, "event": "flap", "pair": ["fog1", "fog2"], "period_s": 4.0, "down_s": 1.0,
                "duration_s": 40.0},
               {"t_s": 3.0, "event": "leave", "node": "fog3", "drain_s": 60.0},
               {"t_s": 40.0, "event": "crash", "node": "fog9", "duration_s": 10.0}]
    out = twin_events(entries, -5.0, ["fog1", "fog2", "fog3"])
    assert out == [{"t_s": 0.0, "node": "fog1", "add_rtt_ms": 60.0},
                   {"t_s": 0.0, "event": "crash", "node": "fog2", "duration_s": 6.0},
                   {"t_s": 0.0, "event": "leave", "node": "fog3", "drain_s": 58.0},
                   # the flap's phase is kept: down at 2, 6, 10 ... of the run, -3, 1, 5 ... of the twin
                   {"t_s": 1.0, "event": "flap", "pair": ["fog1", "fog2"], "period_s": 4.0, "down_s": 1.0,
                    "duration_s": 36.0}]
    assert twin_events(entries[:1], 2.5) == [{"t_s": 2.5, "node": "fog1", "add_rtt_ms": 60.0}]


def test_the_report_records_every_entry_of_the_events_file_link_changes_included() -> None:
    path = ROOT / "inventory" / "latency" / "rhine6-fog1-degrades.yaml"
    assert event_entries(read_events(path), RHINE6, str(path)) == [{"t_s": 90.0, "node": "fog1", "add_rtt_ms": 60.0}]
    # durations in any form, in seconds; the link changes and the fog events in one list, in time order
    raw = [{"t_s": "90s", "event": "crash", "node": "fog1", "duration_s": "2m"},
           {"t_s": 120, "pair": ["fog2", "fog3"], "rtt_ms": 40}, {"t_s": "4m", "event": "leave", "node": "fog2"}]
    assert event_entries(raw, RHINE6, "ev.yaml") == [
        {"t_s": 90.0, "event": "crash", "node": "fog1", "duration_s": 120.0},
        {"t_s": 120.0, "pair": ["fog2", "fog3"], "rtt_ms": 40.0},
        {"t_s": 240.0, "event": "leave", "node": "fog2", "drain_s": 60.0}]


def _rhine6(events: list[dict], source: str) -> object:
    """gesscale on the demo's map at 2 replicas (fog3 and fog1, the first placement), a steady 500 records/s."""
    return scenario_from_dict({
        "name": "rhine6-steady", "control_period_s": 10, "warmup_s": 30,
        "cluster": {"latency_map": str(ROOT / "inventory/latency/rhine6.yaml"), "min_replicas": 1, "max_replicas": 4},
        "operator": {"alpha": 400.0, "beta": 0.9, "gamma": 1.0, "noise": 0.0, "reconfig_pause_s": 5,
                     "initial_replicas": 2},
        "workload": {"kind": "steps", "levels": [500] * 30, "step_s": 10},
        "controller": {"latency_source": source}, "events": events})


def test_fog1_degraded_at_90s_is_moved_off_within_two_periods_when_measured_and_kept_with_the_map() -> None:
    degrades = read_events(ROOT / "inventory" / "latency" / "rhine6-fog1-degrades.yaml")
    run = run_once(_rhine6(degrades, "measured"), "gesscale", seed=1, keep_history=True)
    assert run.history[0].observation.replicas == ("fog3", "fog1")
    [move] = [h.reconfiguration for h in run.history if h.applied]
    assert move.kind == "move" and move.removed == ("fog1",) and 90 < move.time_s <= 90 + 2 * 10
    assert move.nd_max_ms < 10 and run.metrics.moves == 1
    blind = run_once(_rhine6(degrades, "map"), "gesscale", seed=1, keep_history=True)
    assert not [h for h in blind.history if h.applied]
    assert blind.history[-1].observation.nd_max_ms > 60  # the fog did degrade; the map did not say so


def test_fog1_crashed_at_90s_is_replaced_at_the_next_period() -> None:
    crash = read_events(ROOT / "inventory" / "latency" / "rhine6-fog1-crash.yaml")
    run = run_once(_rhine6(crash, "map"), "gesscale", seed=1, keep_history=True)
    applied = [h for h in run.history if h.applied]
    assert applied[0].observation.lost == ("fog1",) and applied[0].observation.time_s == 100
    assert applied[0].reconfiguration.kind == "up" and applied[0].reconfiguration.reason.startswith("replace")
    assert "fog1" not in applied[0].reconfiguration.added


@pytest.mark.parametrize("nodes, message", [
    (["fog1", "zz"], "'initial_nodes' names unknown node 'zz'"),
    (["fog1", "fog1"], "'initial_nodes' lists a node twice"),
    (["fog1"], "'initial_nodes' has 1 node(s), initial_replicas is 2"),
    ("fog1", "'initial_nodes' must be a non-empty list of node names, got 'fog1'")])
def test_a_bad_list_of_first_nodes_is_one_line_naming_the_key(nodes: object, message: str) -> None:
    doc = {"name": "x", "cluster": {"latency_map": str(ROOT / "inventory/latency/rhine6.yaml")},
           "operator": {"initial_replicas": 2, "initial_nodes": nodes},
           "workload": {"kind": "steps", "levels": [10], "step_s": 60}}
    with pytest.raises(UserError, match=re.escape(message)):
        scenario_from_dict(doc, "sc.yaml")
    assert scenario_from_dict({**doc, "operator": {"initial_replicas": 2, "initial_nodes": ["fog5", "fog6"]}},
                              "sc.yaml").truth.initial_nodes == ("fog5", "fog6")


def test_a_run_started_below_its_minimum_has_a_twin_that_starts_there_and_scales_up_at_its_first_period() -> None:
    # the demo starts its job on one executor (fog1) whatever --min-replicas says; its loop adds one at once
    run = LIVE_TABLE3["runs"]["thr-nlunaware-b1"]
    scenario, _ = build_twin(run["periods"], run["reconfigurations"], run["model"], RHINE6.to_dict(), 4,
                             run["warmup_s"], run["control_period_s"], run["arrivals"], min_replicas=2)
    assert scenario["operator"]["initial_replicas"] == 1 and scenario["operator"]["initial_nodes"] == ["fog1"]
    assert scenario["cluster"]["min_replicas"] == 2 and scenario["cluster"]["max_replicas"] == 4
    sim = run_once(scenario_from_dict(scenario, "twin"), "thr-nlunaware", seed=1, keep_history=True)
    first = sim.history[0]
    assert first.observation.replicas == ("fog1",) and first.applied and first.reconfiguration.kind == "up"
    # a run that started within its bounds keeps the simulator's own first placement, as before
    scenario, _ = build_twin(run["periods"], run["reconfigurations"], run["model"], RHINE6.to_dict(), 4,
                             run["warmup_s"], run["control_period_s"], run["arrivals"])
    assert "initial_nodes" not in scenario["operator"] and scenario["operator"]["initial_replicas"] == 1
    # a count alone below the minimum is still a mistake
    with pytest.raises(UserError, match=re.escape("operator.initial_replicas (1) outside [min_replicas, "
                                                  "max_replicas] = [2, 4]")):
        scenario_from_dict({**scenario, "cluster": {**scenario["cluster"], "min_replicas": 2}}, "sc.yaml")


def test_a_degradation_during_a_changes_observation_gap_is_measured_by_the_rounds_inside_it() -> None:
    # as the live monitor's rounds run on their own thread while a scale-up blocks the loop (50 s here), the
    # simulator probes every period inside the gap: fog1's links, 60 ms slower at 20 s, are logged by the round at
    # 40 s (the second sample of the new value), handed to the loop at its next observation (60 s), which moves
    sc = scenario_from_dict({
        "name": "gap", "control_period_s": 10, "warmup_s": 10,
        "cluster": {"latency_map": str(ROOT / "inventory/latency/rhine6.yaml"), "max_replicas": 4},
        "operator": {"alpha": 400.0, "beta": 0.9, "gamma": 1.0, "noise": 0.0, "reconfig_pause_s": 5,
                     "initial_replicas": 1, "initial_nodes": ["fog1"],
                     "reconfig": {"up": {"effective_s": 40, "pause_s": 5, "observation_gap_s": 50}}},
        "workload": {"kind": "steps", "levels": [500] * 30, "step_s": 10},
        "controller": {"latency_source": "measured"}, "events": [{"t_s": 20, "node": "fog1", "add_rtt_ms": 60}]})
    run = run_once(sc, "gesscale", seed=1, keep_history=True)
    up, after = run.history[0], run.history[1]
    assert up.observation.time_s == 10 and up.reconfiguration.kind == "up"
    assert after.observation.time_s == 60 and {(c.a, c.b, c.time_s) for c in after.network_changes} >= {
        ("fog1", "fog2", 40.0), ("fog1", "fog3", 40.0)}
    assert after.reconfiguration.kind == "move" and after.reconfiguration.removed == ("fog1",)
    assert [c for h in run.history for c in h.network_changes] == run.latency_changes  # each handed out once
