"""The pure parts of a live experiment: its figures from the periods and the demo's report, and the decision
log fed from the model summary a live listener receives (the live runs themselves: docs/experiments.md)."""

from __future__ import annotations

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
    assert m["avg_replicas"] == 2.0 and m["max_backlog"] == 250.0 and m["reconfigurations"] == 2
    assert m["pauses_s"] == [41.0, 63.5] and m["lost"] == 0


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
