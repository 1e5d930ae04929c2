"""A live run's decisions against its twin's (gesscale/twin_decisions.py): aligned in order, the same kind within
±2 control periods is the same decision; a decision one side made and the other did not is a difference, said in
one line; a replacement of lost replicas is a kind of its own."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from gesscale.scenario import scenario_from_dict
from gesscale.simulate import run_once
from gesscale.twin_decisions import Decision, compare, compare_seeds, decision_cells, live_decisions

ROOT = Path(__file__).resolve().parents[1]
PERIOD = 10.0


def _row(t: float, kind: str, reason: str = "", added: tuple = (), removed: tuple = ()) -> dict:
    """A reconfiguration as the demo report lists it (the fields compared, and one it does not read)."""
    return {"time_s": t, "kind": kind, "reason": reason, "added": list(added), "removed": list(removed),
            "nodes": ["fog1"], "started_s": t + 0.1}


LIVE = live_decisions([_row(143.2, "up", "root of back pressure", ("fog2",)),
                       _row(101.0, "move", "move fog1 -> fog3", ("fog3",), ("fog1",)),
                       _row(251.0, "down", "DT=61%", removed=("fog2",))])


def test_the_live_decisions_are_in_time_order_with_what_they_changed() -> None:
    assert [Decision(101.0, "move", "+fog3 -fog1"), Decision(143.2, "up", "+fog2"),
                    Decision(251.0, "down", "-fog2")] == LIVE
    assert live_decisions([_row(95.0, "up", "replace 1 lost replica(s) (fog1)", ("fog3",)),
                           {"time_s": None, "kind": "up"}]) == [Decision(95.0, "replace", "+fog3")]


def test_the_same_kinds_in_the_same_order_each_within_two_periods_are_the_same_decisions() -> None:
    twin = [Decision(110.0, "move", "+fog2 -fog1"), Decision(125.0, "up"), Decision(270.0, "down")]
    result = compare(LIVE, twin, PERIOD)
    assert result["same"] and result["matched"] == 3 and result["differences"] == []
    assert [(r["live"], r["twin"], r["dt_s"], r["status"]) for r in result["rows"]] == [
        ("move", "move", 9.0, "same"), ("up", "up", -18.2, "same"), ("down", "down", 19.0, "same")]
    assert result["tolerance_s"] == 20.0


def test_a_missing_move_a_late_decision_and_an_extra_one_are_differences() -> None:
    twin = [Decision(125.0, "up"), Decision(180.0, "up"), Decision(275.0, "down")]
    result = compare(LIVE, twin, PERIOD)
    assert not result["same"] and result["matched"] == 1
    assert [(r["live_s"], r["live"], r["twin_s"], r["twin"], r["status"]) for r in result["rows"]] == [
        (101.0, "move", None, None, "missing"), (143.2, "up", 125.0, "up", "same"),
        (None, None, 180.0, "up", "extra"), (251.0, "down", None, None, "missing"),
        (None, None, 275.0, "down", "extra")]
    assert result["differences"] == [
        "live move at 101 s (+fog3 -fog1) not in the twin within ±20 s in order: the twin made none",
        "twin up at 180 s: the run made none",
        "live down at 251 s (-fog2) not in the twin within ±20 s in order: the twin's nearest down at 275 s (+24 s)",
        "twin down at 275 s: the run made none"]


def test_the_order_counts_and_a_replacement_is_not_a_scale_up() -> None:
    # the twin moves after its scale-up, the run before: only one of the two can be the same in order
    twin = [Decision(100.0, "up"), Decision(105.0, "move"), Decision(251.0, "down")]
    live = [Decision(100.0, "move"), Decision(104.0, "up"), Decision(251.0, "down")]
    result = compare(live, twin, PERIOD)
    assert result["matched"] == 2 and [r["status"] for r in result["rows"]].count("same") == 2
    replaced = compare([Decision(100.0, "replace")], [Decision(100.0, "up")], PERIOD)
    assert replaced["matched"] == 0 and len(replaced["differences"]) == 2


def test_the_simulators_decisions_of_a_crash_are_read_from_its_history_on_the_runs_clock() -> None:
    sc = scenario_from_dict({
        "name": "rhine6-crash", "control_period_s": 10, "warmup_s": 30,
        "cluster": {"latency_map": str(ROOT / "inventory/latency/rhine6.yaml"), "max_replicas": 4},
        "operator": {"alpha": 400.0, "beta": 0.9, "gamma": 1.0, "noise": 0.0, "reconfig_pause_s": 5,
                     "initial_replicas": 2}, "workload": {"kind": "steps", "levels": [500] * 30, "step_s": 10},
        "events": [{"t_s": 90, "event": "crash", "node": "fog1", "duration_s": 120}]})
    history = run_once(sc, "gesscale", seed=1, keep_history=True).history
    # the live run decided its replacement 12 s after the twin's (the twin's t = 0 is 40 s into the run's clock)
    live = [_row(152.0, "up", "replace 1 lost replica(s) (fog1)", ("fog2",))]
    result = compare_seeds(live, {1: history}, 40.0, PERIOD, "gesscale")
    assert result["same_in"] == 1 and result["of"] == 1
    [row] = result["seeds"][1]["rows"]
    assert (row["twin_s"], row["twin"], row["dt_s"]) == (140.0, "replace", -12.0)
    header, cells = decision_cells(result["seeds"][1])
    assert cells == [("152", "replace", "140", "replace", "-12", "same")]


def test_the_console_table_fits_80_columns() -> None:
    from gesscale.cli.fidelity_table import print_decisions

    twin = [Decision(125.0, "up"), Decision(180.0, "up"), Decision(275.0, "down")]
    doc = {"policy": "gesscale", "seeds": {1: compare(LIVE, twin, PERIOD)}}
    console = Console(width=80)
    with console.capture() as cap:
        print_decisions(console, doc)
    text = cap.get()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "decisions live / twin (seed 1): 1 of 3 the same (±20 s); twin 3" in text
    assert "live move at 101 s" in " ".join(text.split())
