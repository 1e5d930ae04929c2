"""The pure parts of a live experiment: its figures from the periods and the demo's report, and the decision
log fed from the model summary a live listener receives (the live runs themselves: docs/experiments.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gesscale.experiment.bundle import DecisionLog
from gesscale.experiment.live import _ModelView, live_metrics
from gesscale.mape import StepRecord
from gesscale.observation import Decision, Observation


def _record(t: float, n: int, throughput: float, bp: float) -> StepRecord:
    obs = Observation(time_s=t, period_s=10.0, input_rate=throughput, throughput=throughput, backlog=0.0,
                      backlog_growth=0.0, bp_upstream=bp, bp_operator=0.0,
                      replicas=tuple(f"fog{i}" for i in range(1, n + 1)), nd_max_ms=20.0)
    return StepRecord(obs, Decision(n, "steady"), None, False)


def test_live_metrics_from_periods_and_report() -> None:
    rows = [{"replicas": 1, "backlog": 10.0}, {"replicas": 3, "backlog": 250.0}]
    report = {"produced": 100, "processed": 100, "lost": 0, "duplicated": 0,
              "reconfigurations": [{"pause_s": 41.0}, {"pause_s": 63.5}]}
    m = live_metrics(rows, report)
    assert m["max_backlog"] == 250.0 and m["reconfigurations"] == 2
    assert m["pauses_s"] == [41.0, 63.5] and m["lost"] == 0
    assert m["replica_minutes"] is None and m["avg_replicas"] is None  # no periods in the report: cannot tell


def test_live_replica_minutes_pay_for_the_time_a_reconfiguration_blocked_the_loop() -> None:
    # A scale-up from 1 to 3 replicas at 20 s blocks the loop until 80 s (the new executors start inside their
    # budgets); the input ends at 80 s and the backlog is gone at 90 s. Three replicas were paid for 70 s.
    periods = [{"time_s": 20.0, "period_s": 10.0, "replicas": ["a"], "backlog": 100.0, "extra": {"input_total": 1000}},
               {"time_s": 80.0, "period_s": 10.0, "replicas": ["a", "b", "c"], "backlog": 50.0,
                "extra": {"input_total": 2000}},
               {"time_s": 90.0, "period_s": 10.0, "replicas": ["a", "b", "c"], "backlog": 0.0,
                "extra": {"input_total": 2000}}]
    rows = [{"replicas": len(p["replicas"]), "backlog": p["backlog"]} for p in periods]
    m = live_metrics(rows, {"periods": periods, "options": {"control_period_s": 10.0}, "reconfigurations": [{}]})
    assert m["replica_minutes"] == pytest.approx((1 * 10 + 3 * 60 + 3 * 10) / 60.0)  # from t0 = 10 s to 90 s
    assert m["span_s"] == pytest.approx(80.0)
    assert m["avg_replicas"] == pytest.approx(220.0 / 80.0)  # time-weighted, not the mean of 3 periods (2.33)


def test_live_moves_are_counted_apart_from_the_scale_changes() -> None:
    report = {"reconfigurations": [{"kind": "up"}, {"kind": "move"}, {"kind": "up"}, {"kind": "down"}]}
    m = live_metrics([], report)
    assert m["reconfigurations"] == 3 and m["moves"] == 1


def test_live_replica_minutes_are_unknown_when_no_observation_saw_the_run_complete() -> None:
    # The run's only change (1 -> 6 at 73 s) outlasted its deadline: the loop ended without observing again, so
    # what the replicas cost after 73 s is unknown, not the first period's 0.12 replica-minutes.
    periods = [{"time_s": 73.0, "period_s": 10.0, "replicas": ["a"], "backlog": 2705.0,
                "extra": {"input_total": 1000}}]
    m = live_metrics([{"replicas": 1, "backlog": 2705.0}], {"periods": periods, "reconfigurations": [{}]})
    assert m["replica_minutes"] is None and m["avg_replicas"] is None and m["span_s"] is None


def test_decision_log_predicts_from_the_summary_before_the_period() -> None:
    log = DecisionLog("gesscale", 0, None)
    log(_record(10, 1, 50.0, 1.0), _ModelView(None, True))  # no model yet: no prediction
    log(_record(20, 2, 90.0, 1.0), _ModelView({"alpha": 50.0, "beta": 1.0, "gamma": 0.5}, True))
    log(_record(30, 2, 95.0, 0.0), _ModelView({"alpha": 50.0, "beta": 1.0, "gamma": 0.5}, True))
    first, second, third = log.rows
    assert first["predicted_mst"] == "" and first["observed_mst"] == 50.0
    assert second["predicted_mst"] == "" and second["observed_mst"] == 90.0  # the fit came with this period
    assert third["predicted_mst"] == 90.0 and third["observed_mst"] == ""  # 50*2 - 0.5*20; not saturated
    unaware = DecisionLog("mdl-nlunaware", 0, None)
    unaware(_record(10, 2, 90.0, 1.0), _ModelView({"alpha": 50.0, "beta": 1.0, "gamma": 0.0}, False))
    unaware(_record(20, 2, 90.0, 1.0), _ModelView({"alpha": 50.0, "beta": 1.0, "gamma": 0.0}, False))
    assert unaware.rows[1]["predicted_mst"] == 100.0 and unaware.rows[1]["error_pct"] == 11.11


def test_the_live_latency_goes_to_the_metrics_and_beside_the_twins_in_the_html() -> None:
    from gesscale.experiment.html import latency_table_html

    lat = {"records": 4, "p50_s": 1.0, "p95_s": 12.0, "p99_s": 12.0, "max_s": 12.0, "over_bound_share": 0.0,
           "over_slo_share": 0.25, "bound_s": 300.0, "slo_s": 10.0, "basis": "output append"}
    m = live_metrics([{"replicas": 1, "backlog": 0.0}], {"latency": lat})
    assert m["latency"] == lat
    twin = {"gesscale": {"records": 9, "p50_s": 0.0, "p95_s": 3.0, "p99_s": 5.0, "max_s": 7.0,
                         "over_bound_share": 0.0, "over_slo_share": 0.0}}
    page = latency_table_html({"gesscale": {"live": m, "twin_latency": twin}})
    assert 'data-table="latency"' in page
    assert "<td>live (output append)</td><td>4</td><td>1.0</td><td>12.0</td><td>12.0</td><td>12.0</td>" \
           "<td>0.00 %</td><td>25.00 %</td>" in page
    assert "<td>simulated twin (FIFO)</td><td>9</td><td>0.0</td><td>3.0</td><td>5.0</td><td>7.0</td>" in page
    assert "SLO 10.0 s" in page

def test_decision_log_predicts_with_the_models_form_and_records_it() -> None:
    log = DecisionLog("gesscale", 0, None)
    summary = {"alpha": 50.0, "beta": 1.0, "gamma": 0.0, "delta": 0.01, "form": "proportional",
               "loo_rms": {"paper": 0.2, "per-replica": 0.05, "proportional": 0.03}}
    log(_record(10, 2, 90.0, 1.0), _ModelView(summary, True))
    log(_record(20, 2, 90.0, 1.0), _ModelView(summary, True))
    row = log.rows[1]
    assert row["predicted_mst"] == 80.0  # 50 * 2 * (1 - 0.01 * 20)
    assert row["model_form"] == "proportional"
    assert row["model_loo_rms"] == "paper 20.0%; per-replica 5.0%; proportional 3.0%"


def test_the_repeats_compare_the_record_latency_percentiles() -> None:
    from gesscale.experiment.repeats import summarise

    runs = {}
    for block in (1, 2, 3):
        for pid, p95 in (("gesscale", 10.0 + block), ("mdl-nlunaware", 20.0 + block)):
            lat = {"records": 5, "p50_s": p95 / 2, "p95_s": p95}
            runs[f"{pid}-b{block}"] = {"policy": pid, "block": block,
                                       "live": live_metrics([{"replicas": 1, "backlog": 0.0}], {"latency": lat})}
    stats = summarise(runs, [("gesscale", "mdl-nlunaware")], seed=1, resamples=200)
    assert "latency_p95_s" in stats["metrics"] and "latency_p50_s" in stats["metrics"]
    assert stats["per_policy"]["gesscale"]["latency_p95_s"]["value"] == 12.0
    pair = stats["pairs"][0]["metrics"]["latency_p95_s"]
    assert pair["mean_difference"]["value"] == -10.0 and pair["p_value"] == 0.25  # 3 blocks, all one sign


def test_a_figure_one_run_could_not_measure_is_left_out_of_that_run_only(tmp_path: Path) -> None:
    from gesscale.experiment.repeats import plot_repeats, stats_tables_html, summarise

    runs = {}
    for block in (1, 2, 3, 4):
        for pid, rmin in (("gesscale", 6.0 + block), ("gesscale-plus", 20.0 + block), ("mdl-nlunaware", 7.0 + block)):
            unknown = pid == "gesscale-plus" and block == 4  # stopped inside its reconfiguration
            runs[f"{pid}-b{block}"] = {"policy": pid, "block": block,
                                       "live": {"replica_minutes": None if unknown else rmin, "lost": 0}}
    stats = summarise(runs, [("gesscale", "mdl-nlunaware"), ("gesscale", "gesscale-plus")], seed=1, resamples=200)
    assert stats["metrics"] == ["replica_minutes", "lost"]  # not dropped for every policy
    assert stats["per_policy"]["gesscale-plus"]["replica_minutes"]["n"] == 3
    assert stats["per_policy"]["gesscale-plus"]["replica_minutes"]["value"] == 22.0
    assert stats["per_policy"]["gesscale"]["replica_minutes"]["n"] == 4
    first, second = stats["pairs"]
    assert first["metrics"]["replica_minutes"]["mean_difference"]["value"] == -1.0
    assert first["metrics"]["replica_minutes"]["blocks"] == 4
    assert second["metrics"]["replica_minutes"]["blocks"] == 3  # the blocks where both measured it
    assert "gesscale-plus" in stats_tables_html(stats)
    assert plot_repeats(runs, stats, tmp_path / "repeats.png", "test") is not None


def test_each_runs_fidelity_is_one_table_in_the_html() -> None:
    from gesscale.experiment.html import fidelity_table_html
    from gesscale.fidelity import fidelity_rows

    rows = fidelity_rows({"reconfigurations": 3, "replica_minutes": 10.0, "excess": 0.1, "p95_latency_s": 8.0},
                         {"reconfigurations": 4, "replica_minutes": 12.0, "excess": 0.0, "p95_latency_s": 5.0})
    page = fidelity_table_html({"gesscale-b1": {"fidelity": rows}, "old-run": {}})
    assert 'data-table="fidelity"' in page and "old-run" not in page  # a run recorded before fidelity: left out
    assert "<tr><td>gesscale-b1</td><td>replica-minutes</td><td>10</td><td>12</td><td>+2</td><td>+20 %</td>" \
           "<td>±15%</td><td>no</td></tr>" in page
    assert fidelity_table_html({"old-run": {}}) == ""
