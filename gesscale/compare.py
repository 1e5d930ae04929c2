"""The comparison matrix: every policy on every scenario over several seeds, run in parallel.

`run_matrix` spreads one job per (scenario, policy, seed) over a process pool (the simulator is pure Python
and CPU-bound, so processes, not threads, use both cores) and reports each finished job to a callback (the
CLI's progress bar). `summarise` takes the medians over seeds; `matrix_markdown` renders one table per metric
(policies × scenarios, the best value of each scenario in bold). Plots live in `gesscale.compare_plots`.

matrix.json: {scenario: {policy: {metric keys of docs/metrics.md}}}, medians over seeds (the requested policies).
regret.json: {scenario: {policy: {cost_vs_optimal, cost_vs_ideal, excess_vs_optimal, excess_vs_ideal,
failed_seeds, seeds}}} (`gesscale.regret`; the references `optimal` and `ideal` always run).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gesscale.errors import UserError
from gesscale.metrics import COUNT_KEYS, METRIC_KEYS
from gesscale.names import inside
from gesscale.regret import Outcome, distribution, failing, fmt_diff, fmt_ratio, fmt_share, regret
from gesscale.report import TITLES

# Policies that are references, not contenders: never marked best in matrix.md.
REFERENCE_POLICIES = ("ideal", "static", "optimal")
Regret = Mapping[str, Mapping[str, Mapping[str, float | int | None]]]


@dataclass(frozen=True)
class Job:
    """One simulation: a scenario file, a policy id and a seed; `keep_series` returns the replica series."""

    scenario_path: str
    policy: str
    seed: int
    keep_series: bool = False
    plugins: tuple[str, ...] = ()  # policy plug-in specs a worker process loads before running
    controller: Mapping[str, object] = field(default_factory=dict)  # controller options over the scenario's
    policy_options: Mapping[str, object] = field(default_factory=dict)  # this policy's options over the scenario's


@dataclass
class JobResult:
    """What a worker sends back: the metrics and, for plotted runs, supply and demand sampled per period."""

    scenario: str
    policy: str
    seed: int
    metrics: dict[str, float]
    period_s: float = 60.0
    supply: list[int] = field(default_factory=list)
    demand: list[int] = field(default_factory=list)
    drained: bool = True  # False: the run hit the drain limit with a backlog left
    late_share: float = 0.0  # share of the records held longer than optimal's delay bound
    provenance: str = ""  # where the scenario's input comes from (`gesscale.report.workload_provenance`)
    rows: list[dict[str, object]] = field(default_factory=list)  # per-period time series (kept runs only)
    warnings: list[str] = field(default_factory=list)  # what the `optimal` reference could not do as asked


def find_scenarios(folder: str | Path) -> list[Path]:
    """The scenario files (*.yaml, *.yml) of a folder, sorted, or the one scenario file given; anything else
    (missing, not YAML, an empty folder) is a `UserError` saying which."""
    p = Path(folder)
    if p.is_file():
        if p.suffix not in (".yaml", ".yml"):
            raise UserError(f"--scenarios {p}: a scenario file ends in .yaml or .yml (or give a folder of them)")
        return [p]
    if p.exists() and not p.is_dir():
        raise UserError(f"--scenarios {p}: neither a folder nor a regular file")
    if not p.is_dir():
        raise UserError(f"scenario folder or file not found: {p}")
    files = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
    if not files:
        raise UserError(f"no scenario files (*.yaml) in {p}")
    return files


def run_job(job: Job) -> JobResult:
    """Simulate one job (runs in a worker process)."""
    from gesscale.policies.base import load_plugin
    from gesscale.policies.optimal import summary_warnings
    from gesscale.report import workload_provenance
    from gesscale.scenario import load_scenario, with_controller
    from gesscale.simulate import period_rows, run_once

    for spec in job.plugins:
        load_plugin(spec)
    sc = with_controller(load_scenario(job.scenario_path), job.controller)
    result = run_once(sc, job.policy, job.seed, keep_history=job.keep_series,
                      policy_options=dict(job.policy_options))
    out = JobResult(sc.name, job.policy, job.seed, result.metrics.to_dict(), sc.control_period_s,
                    drained=result.drained, late_share=result.metrics.late_share,
                    provenance=workload_provenance(sc.workload),
                    warnings=summary_warnings(result.model) if job.policy == "optimal" else [])
    if job.keep_series:
        out.rows = period_rows(result)
        step = max(1, int(round(sc.control_period_s)))
        out.supply = [int(v) for v in result.supply[::step]]
        out.demand = [int(v) for v in np.asarray(result.demand)[::step]]
    return out


def plan_jobs(scenario_paths: Sequence[Path], policies: Sequence[str], seeds: int,
              controller: Mapping[str, object] | None = None,
              policy_options: Mapping[str, Mapping[str, object]] | None = None) -> list[Job]:
    """Every (scenario, policy, seed); each scenario's own seed first, and its first seed keeps the series.

    Seeds are scenario.seed, +1, ... as in `gesscale simulate`. `controller` options replace every scenario's
    (`gesscale.scenario.with_controller`); `policy_options` maps a policy id to its options.
    """
    from gesscale.policies.base import loaded_plugins
    from gesscale.scenario import load_scenario, with_controller

    plugins = tuple(loaded_plugins())
    ctl = dict(controller or {})
    jobs = []
    for path in scenario_paths:
        base = with_controller(load_scenario(path), ctl, f"{path}: command line").seed  # validates every file first
        for pid in policies:
            popts = dict((policy_options or {}).get(pid, {}))
            for i in range(seeds):
                jobs.append(Job(str(path), pid, base + i, keep_series=i == 0, plugins=plugins, controller=ctl,
                                policy_options=popts))
    return jobs


def run_matrix(
    jobs: Sequence[Job], workers: int | None = None, progress: Callable[[JobResult], None] | None = None
) -> list[JobResult]:
    """Run the jobs on `workers` processes (default: the CPU count; 1 runs in this process)."""
    workers = workers or os.cpu_count() or 1
    results: list[JobResult] = []
    if workers <= 1:
        for job in jobs:
            r = run_job(job)
            results.append(r)
            if progress:
                progress(r)
        return results
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_job, job) for job in jobs]
        for fut in as_completed(futures):
            r = fut.result()
            results.append(r)
            if progress:
                progress(r)
    return results


def summarise(results: Sequence[JobResult]) -> dict[str, dict[str, dict[str, float]]]:
    """scenario → policy → median of each metric key over the seeds (scenario and policy order kept)."""
    groups: dict[str, dict[str, list[JobResult]]] = {}
    for r in sorted(results, key=lambda r: r.seed):
        groups.setdefault(r.scenario, {}).setdefault(r.policy, []).append(r)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for sc in sorted(groups):
        out[sc] = {}
        for pid in sorted(groups[sc]):
            runs = groups[sc][pid]
            out[sc][pid] = {k: float(statistics.median(r.metrics[k] for r in runs)) for k in METRIC_KEYS}
    return out


def regret_by_scenario(results: Sequence[JobResult]) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """scenario → policy → regret against the references on the same seeds (`gesscale.regret`)."""
    runs: dict[str, dict[str, list[Outcome]]] = {}
    for r in sorted(results, key=lambda r: r.seed):
        outcome = Outcome(r.seed, r.metrics["cost"], r.metrics["excess_time"], r.drained, r.late_share)
        runs.setdefault(r.scenario, {}).setdefault(r.policy, []).append(outcome)
    return {sc: regret(runs[sc]) for sc in sorted(runs)}


def best_policies(per_policy: Mapping[str, Mapping[str, float]], key: str,
                  regret_rows: Mapping[str, Mapping[str, float | int | None]] | None = None) -> set[str]:
    """The policies with the best value of `key` (lowest; jitter: closest to 0), references excluded, and
    failing policies (a backlog never drained, per `regret_rows`) too."""
    rows = regret_rows or {}
    contenders = {p: m for p, m in per_policy.items() if p not in REFERENCE_POLICIES and not failing(rows.get(p, {}))}
    if len(contenders) < 2:
        return set()

    def score(m: Mapping[str, float]) -> float:
        return abs(m[key]) if key == "jitter" else m[key]

    best = min(score(m) for m in contenders.values())
    return {p for p, m in contenders.items() if abs(score(m) - best) <= 1e-12 * max(1.0, abs(best))}


def _cell(key: str, value: float) -> str:
    if key in COUNT_KEYS:
        return f"{value:.0f}"
    if key in ("cost", "max_backlog"):
        return f"{value:,.0f}"
    if key == "excess_time":
        return f"{value:.4f}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def matrix_markdown(matrix: Mapping[str, Mapping[str, Mapping[str, float]]], seeds: int,
                    regret_matrix: Regret | None = None, provenance: Mapping[str, str] | None = None) -> str:
    """One Markdown table per metric: policies (rows) × scenarios (columns), best of each column in bold.

    With `regret_matrix`, cells of failing policies carry FAIL and a last section gives cost / optimal, excess −
    optimal's and cost / ideal.
    """
    scenarios = list(matrix)
    rg = regret_matrix or {}
    policies = sorted({p for per in matrix.values() for p in per})
    lines = [
        "# Comparison matrix",
        "",
        f"Medians over {seeds} seed(s) per cell. Best value of each scenario in **bold** (lowest; jitter: closest"
        f" to 0); the reference policies ({', '.join(REFERENCE_POLICIES)}) are never marked. Metric definitions:"
        " docs/metrics.md. A cell marked FAIL left a backlog it never drained: it is never marked best.",
    ]
    if provenance:
        lines += ["", "Workloads: " + "; ".join(f"{sc}: {provenance.get(sc, '?')}" for sc in scenarios) + "."]
    for key in METRIC_KEYS:
        lines += ["", f"## {key} ({TITLES[key]})", ""]
        lines.append("| policy | " + " | ".join(scenarios) + " |")
        lines.append("|---|" + "---:|" * len(scenarios))
        bests = {sc: best_policies(matrix[sc], key, rg.get(sc)) for sc in scenarios}
        for pid in policies:
            cells = []
            for sc in scenarios:
                m = matrix[sc].get(pid)
                if m is None:
                    cells.append("–")
                    continue
                text = _cell(key, m[key])
                if failing(rg.get(sc, {}).get(pid, {})):
                    text += " FAIL"
                cells.append(f"**{text}**" if pid in bests[sc] else text)
            lines.append(f"| {pid} | " + " | ".join(cells) + " |")
    if rg:
        lines += ["", "## regret (against the references on the same seeds, medians)", "",
                  "FAIL k/N: k of the N seeds left a backlog that was never drained (the drain limit ended the run);"
                  " such a cost is not comparable. optimal: the cheapest schedule that pays every pause (excess 0,"
                  " every record within 300 s; docs/policies.md)."]
        for title, key, fmt in (("cost / optimal", "cost_vs_optimal", fmt_ratio),
                                ("excess time − optimal's", "excess_vs_optimal", fmt_diff),
                                ("cost / ideal", "cost_vs_ideal", fmt_ratio)):
            lines += ["", f"### {title}", "", "| policy | " + " | ".join(scenarios) + " |",
                      "|---|" + "---:|" * len(scenarios)]
            for pid in policies:
                cells = []
                for sc in scenarios:
                    row = rg.get(sc, {}).get(pid)
                    if row is None:
                        cells.append("–")
                        continue
                    text = fmt(row.get(key))
                    cells.append(f"FAIL {row['failed_seeds']}/{row['seeds']} ({text})" if failing(row) else text)
                lines.append(f"| {pid} | " + " | ".join(cells) + " |")
        if len(scenarios) > 1:
            lines += ["", "### over the scenarios", "", distribution_markdown(distribution(rg))]
    return "\n".join(lines) + "\n"


def distribution_markdown(rows: Mapping[str, Mapping[str, float | int | None]]) -> str:
    """The per-policy distribution over scenarios (`gesscale.regret.distribution`) as one Markdown table."""
    lines = ["Each scenario's median over its seeds, then the median and the 95th percentile over the scenarios;"
             " late: records held longer than optimal's delay bound (300 s);"
             " FAIL: scenarios where some seed never drained its backlog.", "",
             "| policy | cost/optimal median | p95 | excess − optimal's median | p95 | late median | p95 |"
             " FAIL (scenarios) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for pid, row in rows.items():
        lines.append(f"| {pid} | {fmt_ratio(row['cost_vs_optimal_median'])} | {fmt_ratio(row['cost_vs_optimal_p95'])}"
                     f" | {fmt_diff(row['excess_vs_optimal_median'])} | {fmt_diff(row['excess_vs_optimal_p95'])}"
                     f" | {fmt_share(row['late_median'])} | {fmt_share(row['late_p95'])}"
                     f" | {row['failing']} of {row['scenarios']} |")
    return "\n".join(lines)


def series_by_scenario(results: Sequence[JobResult]) -> dict[str, dict[str, tuple[list[int], list[int]]]]:
    """scenario → policy → (supply, demand) of the runs that kept their series (the first seed)."""
    out: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    for r in results:
        if r.supply:
            out.setdefault(r.scenario, {})[r.policy] = (r.supply, r.demand)
    return out


def write_timeseries(results: Sequence[JobResult], folder: str | Path) -> list[Path]:
    """One CSV per (scenario, policy) of the runs that kept their series (the first seed): `<scenario>-<policy>.csv`
    with `gesscale.simulate.TIMESERIES_COLUMNS`."""
    from gesscale.report import write_csv
    from gesscale.simulate import TIMESERIES_COLUMNS

    return [write_csv(inside(folder, f"{r.scenario}-{r.policy}.csv"), r.rows, TIMESERIES_COLUMNS)
            for r in sorted(results, key=lambda r: (r.scenario, r.policy)) if r.rows]


def write_outputs(results: Sequence[JobResult], out_dir: str | Path, seeds: int, workers: int = 1,
                  requested: Sequence[str] | None = None) -> list[Path]:
    """matrix.json, regret.json, regret-distribution.json (per policy, over the scenarios), matrix.md, the two
    heatmaps, regret-boxplots.png and one replicas-over-time PNG per scenario; returns the paths. matrix.json
    holds the `requested` policies (default: all); the rest hold the references too.

    The figures are drawn on `workers` processes (matplotlib is the slow part once the runs are done).
    """
    from gesscale.compare_plots import heatmap, normalised_cost, regret_boxplots, replicas_plot
    from gesscale.report import write_json

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {out}: {err.strerror}") from None
    matrix = summarise(results)
    keep = set(requested) if requested is not None else {r.policy for r in results}
    asked = {sc: {p: m for p, m in per.items() if p in keep} for sc, per in matrix.items()}
    regret_matrix = regret_by_scenario(results)
    paths = [write_json(out / "matrix.json", asked), write_json(out / "regret.json", regret_matrix),
             write_json(out / "regret-distribution.json", distribution(regret_matrix))]
    md = out / "matrix.md"
    md.write_text(matrix_markdown(matrix, seeds, regret_matrix, {r.scenario: r.provenance for r in results}))
    paths.append(md)
    excess = {sc: {p: m["excess_time"] for p, m in per.items()} for sc, per in matrix.items()}
    period = {r.scenario: r.period_s for r in results}
    provenance = {r.scenario: r.provenance for r in results}
    failed = {(sc, p) for sc, per in regret_matrix.items() for p, row in per.items() if failing(row)}
    caption = "Workloads: " + "; ".join(f"{sc}: {provenance[sc]}" for sc in matrix)
    marks = {"failed": failed, "references": REFERENCE_POLICIES, "caption": caption}
    figures: list[tuple[Callable[..., Path], tuple[object, ...], dict[str, object]]] = [
        (heatmap, (normalised_cost(matrix), "cost / ideal cost (medians)", out / "heatmap-cost.png"),
         {"unit": "cost / ideal's cost (ratio)", **marks}),
        (heatmap, (excess, "excess time (fraction of the input duration, medians)", out / "heatmap-excess.png"),
         {"fmt": "{:.3f}", "unit": "excess time (fraction of the input duration)", **marks}),
        (regret_boxplots, (regret_matrix, out / "regret-boxplots.png"), {}),
    ]
    for sc, series in series_by_scenario(results).items():
        figures.append((replicas_plot, (sc, series, period[sc], inside(out, f"replicas-{sc}.png")),
                        {"caption": provenance[sc]}))
    from gesscale.figures import paths_of

    if workers <= 1:
        drawn = [fn(*args, **kwargs) for fn, args, kwargs in figures]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(fn, *args, **kwargs) for fn, args, kwargs in figures]
            drawn = [f.result() for f in futures]
    return paths + [f for png in drawn for f in paths_of(png)]  # each figure as PNG, SVG and PDF
