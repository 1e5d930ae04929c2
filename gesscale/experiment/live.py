"""`environment: local`: each policy run live, `repeats` times, in interleaved blocks, each run on a fresh
fog-in-a-box testbed.

Every run is a `gesscale demo` run (`gesscale.testbed.demo.run_demo`: the embedded broker, Spark standalone, fog
nodes in cgroup CPU budgets, the latency map's RTTs emulated and measured, one synthetic taxi day replayed, the
job's records accounted by unique keys) with the spec's policy; its control loop is followed period by period
for the time series and the decision log, and its simulated twin (built from what the run measured,
`gesscale.twin`) runs `sim_policies` and the run's own policy, against the run (`gesscale.fidelity`).

The runs go block by block (`repeats.block_plan`: every policy once per block, in an order shuffled from the
recorded `order_seed`). Every run replays the same input: the day is sized once, by the first run's probe (or by
the spec's `rides_per_day`), and that volume is given to every later run. Each run's result is written atomically
to `runs/<run>.json` when it ends and `progress.json` records the plan and the runs done, so an interrupted
experiment resumes (`resume=True`) with the runs it has, redoing only the one that was cut.

The bundle: `live/<run>/` (the demo's own report.json, timeline, records' latencies and testbed logs),
`runs/<run>.json`, `timeseries/<run>-live.csv` (with each period's record latency), `decisions.csv` (its `seed`
column is the block), `network.json` (configured and measured), `metrics.json` (every run, the plan, the
statistics), `figures/`, `report.html`, `inputs/`, `manifest.json`.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.experiment.decisions import DECISION_COLUMNS, DecisionLog, model_figure
from gesscale.experiment.manifest import PROGRESS, named, read_json, relative, write_atomic
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
    reconfigurations with their measured pauses, the replicas' cost over time (`gesscale.fidelity.resources`:
    replica-minutes from the input's start until completion, and the time-weighted mean replicas, the
    simulator's `cost` and the twin's), and the peak backlog."""
    from gesscale.fidelity import resources, scale_changes

    cost = resources(report.get("periods") or [])
    changes = report.get("reconfigurations", [])
    return {
        **{k: report.get(k) for k in ("produced", "processed", "lost", "duplicated", "unprocessed", "basis")},
        "reconfigurations": scale_changes(changes),  # scale-ups and downs; the moves apart, as the simulator's
        "moves": sum(1 for r in changes if r.get("kind") == "move"),
        "pauses_s": [r.get("pause_s") for r in report.get("reconfigurations", [])],
        "avg_replicas": cost["avg_replicas"],
        "replica_minutes": cost["replica_minutes"],
        "span_s": cost["span_s"],  # from the input's start until completion: what replica_minutes covers
        "max_backlog": max((r["backlog"] for r in rows), default=None),
        "periods": len(rows),
        "timings_s": report.get("timings_s"),
        "latency": report.get("latency"),  # the day records' end-to-end latency (gesscale.testbed.latency)
        # its percentiles as figures of their own, so that the repeats' statistics compare them too
        "latency_p50_s": (report.get("latency") or {}).get("p50_s"),
        "latency_p95_s": (report.get("latency") or {}).get("p95_s"),
    }


Runner = Callable[..., dict[str, Any]]  # run_demo(opts, say) -> report


def _run_files(out: Path, rid: str) -> list[Path]:
    """Every file a run wrote under `live/<run>/`."""
    folder = named(out, "live", rid)
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def _one_run(spec: ExperimentSpec, pid: str, block: int, rides: int | None, out: Path, runner: Runner,
             say: Callable[[str], None]) -> tuple[dict[str, Any], list[Path]]:
    """Run `pid` live once (block `block`) and return its record and the files it wrote."""
    from gesscale.experiment.repeats import run_id
    from gesscale.latency import PERIOD_COLUMNS, period_columns
    from gesscale.policies.base import make_policy
    from gesscale.report import write_csv
    from gesscale.simulate import TIMESERIES_COLUMNS, history_rows
    from gesscale.testbed.demo import SIM_POLICIES, DemoOptions

    rid = run_id(pid, block)
    history: list[StepRecord] = []
    log = DecisionLog(pid, block, None)
    uses_latency = getattr(make_policy(pid), "uses_latency_in_model", True)

    def listener(record: StepRecord, summary: dict[str, Any] | None) -> None:
        history.append(record)
        log(record, _ModelView(summary, uses_latency))

    local = {**spec.local, **({"rides_per_day": rides} if rides is not None else {})}
    opts = DemoOptions(out=named(out, "live", rid), policy=pid, latency_map=spec.latency_map,
                       sim_policies=",".join(spec.sim_policies) or SIM_POLICIES, listeners=[listener], **local)
    report = runner(opts, say)
    rows = history_rows(history)
    lat = [p.get("latency") for p in report.get("periods", [])]
    csv_rows = [r | period_columns(lat[i] if i < len(lat) else None) for i, r in enumerate(rows)]
    files = [write_csv(named(out, "timeseries", f"{rid}-live.csv"), csv_rows, TIMESERIES_COLUMNS + PERIOD_COLUMNS)]
    timeline = None
    if report.get("timeline_png") and Path(report["timeline_png"]).is_file():
        fig = named(out, "figures", f"timeline-{rid}.png")
        fig.parent.mkdir(parents=True, exist_ok=True)
        for src, dst in zip(paths_of(report["timeline_png"]), paths_of(fig), strict=True):  # PNG, SVG, PDF
            if src.is_file():
                shutil.copyfile(src, dst)
                files.append(dst)
        timeline = relative(out, fig)
    workload = opts.workload()
    record = {"run": rid, "policy": pid, "block": block, "live": live_metrics(rows, report),
              "twin": report.get("simulation"), "twin_latency": report.get("simulated_latency"),
              "calibrated_scenario": report.get("calibrated_scenario"),  # the twin (gesscale.twin)
              "twin_built_from": report.get("twin"), "fidelity": report.get("fidelity"),
              "load": report.get("load"), "network": report.get("network"), "timeline": timeline,
              "input": {"workload": workload, "sha256_of_workload_spec":
                        hashlib.sha256(json.dumps(workload, sort_keys=True).encode()).hexdigest()},
              "decisions": log.rows}
    path = write_atomic(named(out, "runs", f"{rid}.json"), json.dumps(record, indent=1) + "\n")
    return record, [*_run_files(out, rid), *files, path]


def _comparable(resolved: dict[str, Any]) -> dict[str, Any]:
    """The parts of a resolved spec that must not change between an interrupted run and its resumption."""
    return {k: v for k, v in resolved.items() if k not in ("source",)}


def _start(spec: ExperimentSpec, out: Path, argv: list[str], resume: bool) -> dict[str, Any]:
    """The progress document: a new plan (inputs carried), or the interrupted one when resuming."""
    from gesscale.experiment.inputs import carry
    from gesscale.experiment.provenance import environment_record
    from gesscale.experiment.repeats import block_plan

    if resume:
        state = read_json(out / PROGRESS)
        if not isinstance(state, dict) or _comparable(state.get("spec", {})) != _comparable(
                json.loads(json.dumps(spec.resolved()))):
            raise UserError(f"--resume: the experiment file changed since {out} was started; run it into a new "
                            "folder")
        # each sitting's code and machine: a checkout may have moved between them
        state.setdefault("resumed", []).append({**environment_record(Path(__file__).resolve().parents[2], argv),
                                                "runs_done_before": len(state["completed"])})
        return state
    seed = spec.order_seed if spec.order_seed is not None else secrets.randbelow(2**32)
    inputs, written = carry(spec, out)
    return {"spec": spec.resolved(), "inputs": inputs, "order_seed": seed,
            "blocks": block_plan(list(spec.policies), spec.repeats, seed),
            # taken before the runs: the commit and versions of the code that runs (a checkout may move meanwhile)
            "environment": environment_record(Path(__file__).resolve().parents[2], argv),
            "rides_per_day": spec.local.get("rides_per_day"), "sized_by": "given (local.rides_per_day)"
            if spec.local.get("rides_per_day") is not None else None,
            "completed": [], "running": None, "files": {relative(out, p): None for p in written}}


def _save(out: Path, state: dict[str, Any]) -> None:
    write_atomic(out / PROGRESS, json.dumps(state, indent=1) + "\n")


def run_live_experiment(spec: ExperimentSpec, out: Path, argv: list[str], say: Callable[[str], None] = print,
                        force: bool = False, resume: bool = False, runner: Runner | None = None) -> list[Path]:
    """Run every policy of a `local` spec live, `repeats` times in blocks, and write the bundle; `resume`
    continues an interrupted one in `out`; `runner` is `run_demo` unless a test gives another. Returns the paths
    written, the manifest last."""
    from gesscale.experiment.manifest import prepare_out, write_manifest
    from gesscale.experiment.repeats import run_id

    if runner is None:
        from gesscale.testbed.demo import run_demo as runner
    prepare_out(out, force, resume)
    state = _start(spec, out, argv, resume)
    _save(out, state)
    total = sum(len(b) for b in state["blocks"])
    done = len(state["completed"])
    if resume:
        say(f"resuming {out}: {done} of {total} runs done")
    for block, order in enumerate(state["blocks"], start=1):
        for pid in order:
            rid = run_id(pid, block)
            if rid in state["completed"]:
                continue
            partial = named(out, "live", rid)
            if partial.exists():  # cut short by the interruption: redone from the start
                shutil.rmtree(partial)
            state["running"] = f"live/{rid}"
            _save(out, state)
            done += 1
            say(f"live run {done}/{total}: {pid}, block {block} (order {', '.join(order)})")
            record, files = _one_run(spec, pid, block, state["rides_per_day"], out, runner, say)
            if state["rides_per_day"] is None:
                state["rides_per_day"] = (record.get("load") or {}).get("rides_per_day")
                state["sized_by"] = f"the probe of the first run ({rid}), then given to every later run"
            state["files"].update({relative(out, p): None for p in files})
            state["completed"].append(rid)
            state["running"] = None
            _save(out, state)
    paths = [out / name for name in state["files"]]
    paths += _assemble(spec, out, state)
    (out / PROGRESS).unlink()
    paths.append(write_manifest(out, paths, state["inputs"], "live"))
    return paths


def _assemble(spec: ExperimentSpec, out: Path, state: dict[str, Any]) -> list[Path]:
    """The bundle's shared files from the runs' results: spec, environment, network, decisions, metrics with the
    statistics, figures, report."""
    from gesscale.experiment.html import write_live_report
    from gesscale.experiment.repeats import plot_repeats, run_id, summarise
    from gesscale.latency_map import load_latency_map
    from gesscale.report import write_csv, write_json
    from gesscale.testbed import DEMO_MAP

    runs: dict[str, dict[str, Any]] = {}
    for block, order in enumerate(state["blocks"], start=1):
        for pid in order:
            rid = run_id(pid, block)
            runs[rid] = read_json(named(out, "runs", f"{rid}.json"))
    decisions = [row for r in runs.values() for row in r.pop("decisions", [])]
    paths: list[Path] = []
    source = Path(spec.source)
    if source.is_file():
        shutil.copyfile(source, out / "spec.yaml")
        paths.append(out / "spec.yaml")
    paths.append(write_json(out / "spec.resolved.json", {**spec.resolved(), "order_seed": state["order_seed"]}))
    provenance = "synthetic diurnal taxi day (NYC weekday hourly shape) replayed into Kafka by the demo's producer"
    plan = {"order_seed": state["order_seed"], "blocks": state["blocks"], "rides_per_day": state["rides_per_day"],
            "sized_by": state["sized_by"]}
    paths.append(write_json(out / "environment.json", {**state["environment"], "resumed": state.get("resumed", []),
                                                         "input": {
        "provenance": provenance, "rides_per_day": state["rides_per_day"], "sized_by": state["sized_by"],
        "by_run": {rid: r["input"] for rid, r in runs.items()}}}))
    configured = load_latency_map(spec.latency_map or DEMO_MAP).to_dict()
    paths.append(write_json(out / "network.json", {"configured": configured,
                                                   "measured": {rid: r.get("network") for rid, r in runs.items()}}))
    paths.append(write_csv(out / "decisions.csv", decisions, DECISION_COLUMNS))
    stats = summarise(runs, spec.compare, seed=state["order_seed"])
    paths.append(write_json(out / "metrics.json", {"environment": "local", "plan": plan, "statistics": stats,
                                                   "runs": runs}))
    figures = [out / r["timeline"] for r in runs.values() if r.get("timeline") and r["block"] == 1]
    repeat_fig = plot_repeats(runs, stats, out / "figures" / "repeats.png", f"Workload: {provenance}; "
                              f"{len(state['blocks'])} block(s), order shuffled from seed {state['order_seed']}.")
    if repeat_fig is not None:
        figures.insert(0, repeat_fig)
        paths += [f for f in paths_of(repeat_fig) if f.is_file()]  # PNG (in report.html), SVG, PDF
    model_fig = model_figure(decisions, out / "figures" / "model-vs-observed.png", provenance)
    if model_fig is not None:
        figures.append(model_fig)
        paths += [f for f in paths_of(model_fig) if f.is_file()]
    all_files = [out / n for n in state["files"]] + paths
    paths.append(write_live_report(out, spec, runs, provenance, figures, decisions, stats=stats, plan=plan,
                                   files=all_files))
    return paths
