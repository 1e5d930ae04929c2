"""Run an experiment in the simulator and write its bundle (`gesscale experiment run SPEC.yaml --out DIR`).

The bundle (DIR):
- `spec.yaml` (the file as given) and `spec.resolved.json` (paths absolute, defaults filled, the scenario run);
- `environment.json`: package versions, git commit, machine facts, the command, and the input's provenance and
  SHA-256 per seed (plus the file's, for a recorded rate file);
- `network.json`: the latency map as configured (the simulator's ground truth: nothing is measured);
- `timeseries/<policy>-seed<N>.csv`: one row per control period (`gesscale.simulate.TIMESERIES_COLUMNS`);
- `decisions.csv`: every decision with its reason and, for a policy with a performance model, the MST its model
  predicted for the configuration in force (the model as it stood before the period) against the MST then
  observed (the throughput of a saturated period without pause; empty otherwise);
- `metrics.json`: medians per policy, the regret against the references, and every run's metrics;
- `figures/`: the Figure-7 panel of every policy, the model's predictions against observations;
- `table3.md`: the reproduction of the paper's Table III; `report.html`: all of it in one self-contained page.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.experiment.spec import ExperimentSpec, scenario_of
from gesscale.mape import StepRecord
from gesscale.model import PerformanceModel

DECISION_COLUMNS = ("policy", "seed", "t_s", "replicas", "nd_max_ms", "throughput", "saturated", "decision",
                    "applied", "reason", "predicted_mst", "observed_mst", "error_pct")


class DecisionLog:
    """Collects the decision log of one run through `run_once(on_step=...)`."""

    def __init__(self, policy: str, seed: int, initial: PerformanceModel | None) -> None:
        self.policy, self.seed = policy, seed
        self.rows: list[dict[str, Any]] = []
        self._before = self._snapshot(initial)

    @staticmethod
    def _snapshot(model: PerformanceModel | None) -> PerformanceModel | None:
        if model is None or not model.is_fitted:
            return None
        return PerformanceModel.from_dict({"alpha": model.alpha_, "beta": model.beta_, "gamma": model.gamma_,
                                           "n_params": model.n_params_})

    def __call__(self, record: StepRecord, policy: Any) -> None:
        """Record one period (called by the control loop after the policy decided)."""
        o, d = record.observation, record.decision
        nd = o.nd_max_ms if getattr(policy, "uses_latency_in_model", True) else 0.0
        saturated = o.bp_upstream > 0.5 and o.paused_s == 0
        predicted = self._before.predict(o.n, nd) if self._before is not None else None
        observed = o.throughput if saturated else None
        error = (100.0 * (predicted - observed) / observed
                 if predicted is not None and observed is not None and observed > 0 else None)
        self.rows.append({
            "policy": self.policy, "seed": self.seed, "t_s": o.time_s, "replicas": o.n,
            "nd_max_ms": round(o.nd_max_ms, 2), "throughput": round(o.throughput, 2), "saturated": int(saturated),
            "decision": d.target, "applied": int(record.applied), "reason": d.reason,
            "predicted_mst": "" if predicted is None else round(predicted, 2),
            "observed_mst": "" if observed is None else round(observed, 2),
            "error_pct": "" if error is None else round(error, 2),
        })
        self._before = self._snapshot(getattr(policy, "model", None))


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
                   progress: Callable[[str, int], None] | None = None) -> list[Path]:
    """Run every policy of the spec on every seed (plus the regret references) and write the bundle; returns
    the paths written."""
    from gesscale.experiment.html import write_report
    from gesscale.experiment.paper import reproduction_markdown
    from gesscale.experiment.provenance import environment_record
    from gesscale.model_file import load_model_file
    from gesscale.report import plot_figure7, simulate_json, workload_provenance, write_csv, write_json
    from gesscale.simulate import TIMESERIES_COLUMNS, period_rows, run_once, seeds_for, with_references

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {out}: {err.strerror}") from None
    if spec.environment == "local":
        from gesscale.experiment.live import run_live_experiment

        return run_live_experiment(spec, out, argv)
    if spec.environment != "sim":
        raise UserError(f"environment '{spec.environment}' is not built yet (sim and local run)")
    scenario = scenario_of(spec)
    model = load_model_file(spec.model) if spec.model is not None else None
    seeds = seeds_for(scenario, spec.seeds)
    run_ids = with_references(list(spec.policies))
    results: dict[str, list[Any]] = {}
    decisions: list[dict[str, Any]] = []
    paths: list[Path] = []
    for pid in run_ids:
        results[pid] = []
        for seed in seeds:
            log = DecisionLog(pid, seed, model)
            r = run_once(scenario, pid, seed, keep_history=True, initial_model=model,
                         policy_options=spec.policy_options.get(pid), on_step=log, **spec.controller)
            results[pid].append(r)
            decisions += log.rows
            paths.append(write_csv(out / "timeseries" / f"{pid}-seed{seed}.csv", period_rows(r), TIMESERIES_COLUMNS))
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
    paths.append(write_json(out / "network.json", {
        "configured": scenario.latency_map.to_record(_used_nodes(results)), "measured": None,
        "note": "simulator: the configured map is the ground truth; nothing is measured"}))
    paths.append(write_csv(out / "decisions.csv", decisions, DECISION_COLUMNS))
    doc = simulate_json(scenario.name, next(iter(results.values()))[0].duration_s, results,
                        requested=list(spec.policies))
    doc["runs"] = [{"policy": r.policy, "seed": r.seed, "drained": bool(r.drained), **r.metrics.to_dict()}
                   for runs in results.values() for r in runs]
    paths.append(write_json(out / "metrics.json", doc))
    provenance = workload_provenance(scenario.workload)
    figures = [plot_figure7({pid: results[pid][0] for pid in spec.policies}, out / "figures" / "figure7.png",
                            caption=provenance)]
    model_fig = _model_figure(decisions, out / "figures" / "model-vs-observed.png", provenance)
    if model_fig is not None:
        figures.append(model_fig)
    paths += figures
    table3 = reproduction_markdown(doc["policies"], provenance, spec.seeds)
    if table3:
        (out / "table3.md").write_text(table3)
        paths.append(out / "table3.md")
    paths.append(write_report(out, spec, doc, provenance, figures, decisions, table3))
    return paths


def _model_figure(decisions: list[dict[str, Any]], path: Path, caption: str) -> Path | None:
    """Predicted against observed MST over time, per model-based policy (first seed); None without any."""
    pairs: dict[str, list[tuple[float, float, float]]] = {}
    first_seed: dict[str, int] = {}
    for row in decisions:
        first_seed.setdefault(row["policy"], row["seed"])
        if row["seed"] == first_seed[row["policy"]] and row["predicted_mst"] != "" and row["observed_mst"] != "":
            pairs.setdefault(row["policy"], []).append((row["t_s"], row["predicted_mst"], row["observed_mst"]))
    if not pairs:
        return None
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(pairs), figsize=(max(6.0, 4.2 * len(pairs)), 3.6), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (pid, pts) in zip(axes[0], sorted(pairs.items()), strict=False):
        t = [p[0] / 60.0 for p in pts]
        ax.scatter(t, [p[2] for p in pts], s=8, color="tab:orange", label="observed MST (saturated periods)")
        ax.scatter(t, [p[1] for p in pts], s=8, marker="x", color="tab:blue", label="model's prediction before")
        ax.set_title(pid, fontsize=9)
        ax.set_xlabel("time (min)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("MST (records/s)")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("performance model: predicted against observed MST (first seed)", fontsize=10)
    fig.supxlabel(textwrap.fill(f"Workload: {caption}", 110), fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _used_nodes(results: dict[str, list[Any]]) -> set[str]:
    """Every node a run placed a replica on (a large map's record keeps only their rows)."""
    return {n for runs in results.values() for r in runs for h in r.history for n in h.observation.replicas}
