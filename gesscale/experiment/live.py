"""`environment: local`: each policy run live, one after another, each on a fresh fog-in-a-box testbed.

Every run is a `gesscale demo` run (`gesscale.testbed.demo.run_demo`: the embedded broker, Spark standalone, fog
nodes in cgroup CPU budgets, the latency map's RTTs emulated and measured, one synthetic taxi day replayed, the
job's records accounted by unique keys) with the spec's policy; its control loop is followed period by period
for the time series and the decision log, and its calibrated simulated twin runs `sim_policies`. The bundle:
`live/<policy>/` (the demo's own report.json, timeline, records' latencies and testbed logs),
`timeseries/<policy>-live.csv` (with each period's record latency),
`decisions.csv`, `network.json` (configured and measured), `metrics.json`, `figures/`, `report.html`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.experiment.bundle import DECISION_COLUMNS, DecisionLog, _model_figure
from gesscale.experiment.spec import ExperimentSpec
from gesscale.figures import paths_of
from gesscale.mape import StepRecord
from gesscale.model import PerformanceModel


class _ModelView:
    """What `DecisionLog` reads of a policy, rebuilt from the model summary a live listener receives."""

    def __init__(self, summary: dict[str, Any] | None, uses_latency: bool) -> None:
        self.uses_latency_in_model = uses_latency
        self.loo_rms = (summary or {}).get("loo_rms") or {}
        self.model = None
        if summary and summary.get("alpha") is not None:
            self.model = PerformanceModel.from_dict({"alpha": summary["alpha"], "beta": summary.get("beta", 1.0),
                                                     "gamma": summary.get("gamma", 0.0),
                                                     "delta": summary.get("delta", 0.0),
                                                     "form": summary.get("form", "paper")})


def live_metrics(rows: list[dict[str, Any]], report: dict[str, Any]) -> dict[str, Any]:
    """A live run's figures: the job's accounting (records produced, processed, lost, duplicated), the
    reconfigurations with their measured pauses, and from the periods the mean replicas and the peak backlog."""
    replicas = [r["replicas"] for r in rows]
    return {
        **{k: report.get(k) for k in ("produced", "processed", "lost", "duplicated", "unprocessed", "basis")},
        "reconfigurations": len(report.get("reconfigurations", [])),
        "pauses_s": [r.get("pause_s") for r in report.get("reconfigurations", [])],
        "avg_replicas": sum(replicas) / len(replicas) if replicas else None,
        "max_backlog": max((r["backlog"] for r in rows), default=None),
        "periods": len(rows),
        "timings_s": report.get("timings_s"),
        "latency": report.get("latency"),  # the day records' end-to-end latency (gesscale.testbed.latency)
    }


def run_live_experiment(spec: ExperimentSpec, out: Path, argv: list[str],
                        say: Callable[[str], None] = print) -> list[Path]:
    """Run every policy of a `local` spec live and write the bundle; returns the paths written."""
    from gesscale.experiment.html import write_live_report
    from gesscale.experiment.provenance import environment_record
    from gesscale.latency import PERIOD_COLUMNS, period_columns
    from gesscale.latency_map import load_latency_map
    from gesscale.policies.base import make_policy
    from gesscale.report import write_csv, write_json
    from gesscale.simulate import TIMESERIES_COLUMNS, history_rows
    from gesscale.testbed.demo import SIM_POLICIES, DemoOptions, run_demo

    out.mkdir(parents=True, exist_ok=True)
    # taken before the runs: the commit and versions of the code that runs (a checkout may move meanwhile)
    provenance_record = environment_record(Path(__file__).resolve().parents[2], argv)
    paths: list[Path] = []
    decisions: list[dict[str, Any]] = []
    runs: dict[str, dict[str, Any]] = {}
    network: dict[str, Any] = {}
    figures: list[Path] = []
    inputs: dict[str, Any] = {}
    for pid in spec.policies:
        history: list[StepRecord] = []
        log = DecisionLog(pid, 0, None)
        uses_latency = getattr(make_policy(pid), "uses_latency_in_model", True)

        def listener(record: StepRecord, summary: dict[str, Any] | None,
                     history: list[StepRecord] = history, log: DecisionLog = log, uses: bool = uses_latency) -> None:
            history.append(record)
            log(record, _ModelView(summary, uses))

        opts = DemoOptions(out=out / "live" / pid, policy=pid, latency_map=spec.latency_map,
                           sim_policies=",".join(spec.sim_policies) or SIM_POLICIES, listeners=[listener],
                           **spec.local)
        say(f"live run of {pid} ({len(runs) + 1}/{len(spec.policies)})")
        report = run_demo(opts, say)
        rows = history_rows(history)
        lat = [p.get("latency") for p in report.get("periods", [])]
        csv_rows = [r | period_columns(lat[i] if i < len(lat) else None) for i, r in enumerate(rows)]
        paths.append(write_csv(out / "timeseries" / f"{pid}-live.csv", csv_rows,
                               TIMESERIES_COLUMNS + PERIOD_COLUMNS))
        decisions += log.rows
        runs[pid] = {"live": live_metrics(rows, report), "twin": report.get("simulation"),
                     "twin_latency": report.get("simulated_latency"),
                     "calibrated_scenario": report.get("calibrated_scenario"), "load": report.get("load")}
        network[pid] = report.get("network")
        workload = opts.workload()
        inputs[pid] = {"workload": workload, "sha256_of_workload_spec":
                       hashlib.sha256(json.dumps(workload, sort_keys=True).encode()).hexdigest()}
        if report.get("timeline_png") and Path(report["timeline_png"]).is_file():
            fig = out / "figures" / f"timeline-{pid}.png"
            fig.parent.mkdir(parents=True, exist_ok=True)
            for src, dst in zip(paths_of(report["timeline_png"]), paths_of(fig), strict=True):  # PNG, SVG, PDF
                if src.is_file():
                    shutil.copyfile(src, dst)
            figures.append(fig)
    source = Path(spec.source)
    if source.is_file():
        shutil.copyfile(source, out / "spec.yaml")
        paths.append(out / "spec.yaml")
    paths.append(write_json(out / "spec.resolved.json", spec.resolved()))
    provenance = "synthetic diurnal taxi day (NYC weekday hourly shape) replayed into Kafka by the demo's producer"
    paths.append(write_json(out / "environment.json", {**provenance_record, "input": {
        "provenance": provenance, "by_policy": inputs}}))
    from gesscale.testbed import DEMO_MAP

    configured = load_latency_map(spec.latency_map or DEMO_MAP).to_dict()
    paths.append(write_json(out / "network.json", {"configured": configured, "measured": network}))
    paths.append(write_csv(out / "decisions.csv", decisions, DECISION_COLUMNS))
    paths.append(write_json(out / "metrics.json", {"environment": "local", "runs": runs}))
    model_fig = _model_figure(decisions, out / "figures" / "model-vs-observed.png", provenance)
    if model_fig is not None:
        figures.append(model_fig)
    paths += [f for png in figures for f in paths_of(png) if f.is_file()]  # PNG (in report.html), SVG, PDF
    paths.append(write_live_report(out, spec, runs, provenance, figures, decisions))
    return paths
