"""Run an experiment in the simulator and write its bundle (`gesscale experiment run SPEC.yaml --out DIR`).

The bundle (DIR):
- `spec.yaml` (the file as given) and `spec.resolved.json` (paths absolute, defaults filled, the scenario run);
- `environment.json`: package versions, git commit, machine facts, the command, and the input's provenance and
  SHA-256 per seed (plus the file's, for a recorded rate file);
- `network.json`: the latency map as configured (the simulator's ground truth), and, with `latency_source:
  measured` or `both`, the changes the controller's measured view logged (else nothing is measured);
- `timeseries/<policy>-seed<N>.csv`: one row per control period (`gesscale.simulate.TIMESERIES_COLUMNS`);
- `decisions.csv`: every decision with its reason and, for a policy with a performance model, the MST its model
  predicted for the configuration in force (the model as it stood before the period) against the MST then
  observed (the throughput of a saturated period without pause; empty otherwise);
- `metrics.json`: medians per policy, the regret against the references, and every run's metrics;
- `figures/`: the Figure-7 panel of every policy, the model's predictions against observations;
- `table3.md`: the reproduction of the paper's Table III; `report.html`: all of it in one self-contained page;
- `inputs/`: byte copies of every file the run read (scenario, maps, rate file, model, plug-ins), which a replay
  reads instead of the originals;
- `manifest.json`: every file the run wrote with its SHA-256, and the inputs with theirs (`manifest`).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.experiment.decisions import DECISION_COLUMNS, DecisionLog, model_figure
from gesscale.experiment.spec import ExperimentSpec, scenario_of

__all__ = ["DECISION_COLUMNS", "DecisionLog", "run_experiment"]

def _input_record(scenario: Any, seeds: list[int]) -> dict[str, Any]:
    from gesscale.experiment.provenance import sha256_of_array, sha256_of_file
    from gesscale.report import workload_provenance
    from gesscale.workloads import rate_profile

    w = scenario.workload
    out: dict[str, Any] = {"workload": w, "provenance": workload_provenance(w),
                           "rate_sha256_by_seed": {str(s): sha256_of_array(rate_profile(w, seed=s)) for s in seeds}}
    if w.get("kind") == "csv" and w.get("path"):
        out["file_sha256"] = sha256_of_file(w["path"])
    return out


def run_experiment(spec: ExperimentSpec, out_dir: str | Path, argv: list[str],
                   progress: Callable[[str, int], None] | None = None, force: bool = False,
                   kind: str = "run") -> list[Path]:
    """Run every policy of the spec on every seed (plus the regret references) and write the bundle into a new or
    empty folder (`force`: replace the bundle in it; `gesscale.experiment.manifest.prepare_out`); returns the paths
    written, the manifest last."""
    from gesscale.experiment.manifest import prepare_out, write_manifest
    from gesscale.model_file import load_model_file

    out = Path(out_dir)
    if spec.environment == "local":
        from gesscale.experiment.live import run_live_experiment

        return run_live_experiment(spec, out, argv, force=force)
    if spec.environment != "sim":
        raise UserError(f"environment '{spec.environment}' is not built yet (sim and local run)")
    scenario = scenario_of(spec)
    model = load_model_file(spec.model) if spec.model is not None else None
    prepare_out(out, force)
    paths: list[Path] = []
    try:
        return _write(spec, scenario, model, out, argv, progress, kind, paths)
    except BaseException:
        # a run cut short still says what it wrote, so that --force can clear it (and nothing else)
        write_manifest(out, [p for p in paths if p.is_file()], {}, f"{kind} (incomplete)")
        raise


def _write(spec: ExperimentSpec, scenario: Any, model: Any, out: Path, argv: list[str],
           progress: Callable[[str, int], None] | None, kind: str, paths: list[Path]) -> list[Path]:
    """The body of `run_experiment`: appends every file to `paths` as soon as it is written."""
    from gesscale.experiment.html import write_report
    from gesscale.experiment.inputs import carry
    from gesscale.experiment.manifest import named, write_manifest
    from gesscale.experiment.paper import reproduction_markdown
    from gesscale.experiment.provenance import environment_record
    from gesscale.figures import paths_of
    from gesscale.report import (
        figure7_runs,
        measured_network,
        plot_figure7,
        simulate_json,
        workload_provenance,
        write_csv,
        write_json,
    )
    from gesscale.simulate import TIMESERIES_COLUMNS, period_rows, run_once, seeds_for, with_references

    inputs, _ = carry(spec, out, paths)
    seeds = seeds_for(scenario, spec.seeds)
    run_ids = with_references(list(spec.policies))
    results: dict[str, list[Any]] = {}
    decisions: list[dict[str, Any]] = []
    for pid in run_ids:
        results[pid] = []
        for seed in seeds:
            log = DecisionLog(pid, seed, model)
            r = run_once(scenario, pid, seed, keep_history=True, initial_model=model,
                         policy_options=spec.policy_options.get(pid), on_step=log, **spec.controller)
            results[pid].append(r)
            decisions += log.rows
            paths.append(write_csv(named(out, "timeseries", f"{pid}-seed{seed}.csv"), period_rows(r),
                                   TIMESERIES_COLUMNS))
            if progress:
                progress(pid, seed)
    source = Path(spec.source)
    if source.is_file():
        shutil.copyfile(source, out / "spec.yaml")
        paths.append(out / "spec.yaml")
    resolved = {**spec.resolved(), "scenario": {
        "name": scenario.name, "control_period_s": scenario.control_period_s, "min_replicas": scenario.min_replicas,
        "max_replicas": scenario.max_replicas, "seed": scenario.seed, "workload": scenario.workload,
        "truth": dataclasses.asdict(scenario.truth)}}
    paths.append(write_json(out / "spec.resolved.json", resolved))
    repo = Path(__file__).resolve().parents[2]
    paths.append(write_json(out / "environment.json", {**environment_record(repo, argv),
                                                         "input": _input_record(scenario, seeds)}))
    measured = measured_network(results)
    paths.append(write_json(out / "network.json", {
        "configured": scenario.latency_map.to_record(_used_nodes(results)), "measured": measured,
        "note": "simulator: the configured map is the ground truth; " + (
            "nothing is measured" if measured is None else
            "measured: the changes the controller's view logged, sampled from it each period (latency_source)")}))
    paths.append(write_csv(out / "decisions.csv", decisions, DECISION_COLUMNS))
    doc = simulate_json(scenario.name, next(iter(results.values()))[0].duration_s, results,
                        requested=list(spec.policies))
    doc["runs"] = [{"policy": r.policy, "seed": r.seed, "drained": bool(r.drained), **r.metrics.to_dict()}
                   for runs in results.values() for r in runs]
    paths.append(write_json(out / "metrics.json", doc))
    provenance = workload_provenance(scenario.workload)
    figures = [plot_figure7(figure7_runs(results, list(spec.policies)), out / "figures" / "figure7.png",
                            caption=provenance)]
    model_fig = model_figure(decisions, out / "figures" / "model-vs-observed.png", provenance)
    if model_fig is not None:
        figures.append(model_fig)
    paths += [f for png in figures for f in paths_of(png)]  # PNG (in report.html), SVG and PDF
    table3 = reproduction_markdown(doc["policies"], provenance, spec.seeds)
    if table3:
        (out / "table3.md").write_text(table3)
        paths.append(out / "table3.md")
    paths.append(write_report(out, spec, doc, provenance, figures, decisions, table3, files=paths))
    paths.append(write_manifest(out, paths, inputs, kind))
    return paths


def _used_nodes(results: dict[str, list[Any]]) -> set[str]:
    """Every node a run placed a replica on (a large map's record keeps only their rows)."""
    return {n for runs in results.values() for r in runs for h in r.history for n in h.observation.replicas}
