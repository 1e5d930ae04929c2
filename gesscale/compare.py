"""The comparison matrix: every policy on every scenario over several seeds, run in parallel.

`run_matrix` spreads one job per (scenario, policy, seed) over a process pool (the simulator is pure Python
and CPU-bound, so processes, not threads, use both cores) and reports each finished job to a callback (the
CLI's progress bar). `summarise` takes the medians over seeds; `matrix_markdown` renders one table per metric
(policies × scenarios, the best value of each scenario in bold). Plots live in `gesscale.compare_plots`.

matrix.json: {scenario: {policy: {DESIGN §4 metric keys}}}, medians over seeds.
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
from gesscale.metrics import METRIC_KEYS
from gesscale.report import TITLES

# Policies that are references, not contenders: never marked best in matrix.md.
REFERENCE_POLICIES = ("ideal", "static")


@dataclass(frozen=True)
class Job:
    """One simulation: a scenario file, a policy id and a seed; `keep_series` returns the replica series."""

    scenario_path: str
    policy: str
    seed: int
    keep_series: bool = False
    plugins: tuple[str, ...] = ()  # policy plug-in specs a worker process loads before running


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


def find_scenarios(folder: str | Path) -> list[Path]:
    """The scenario files (*.yaml, *.yml) of a folder, sorted; a missing or empty folder is a `UserError`."""
    p = Path(folder)
    if not p.is_dir():
        raise UserError(f"scenario folder not found: {p}")
    files = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
    if not files:
        raise UserError(f"no scenario files (*.yaml) in {p}")
    return files


def run_job(job: Job) -> JobResult:
    """Simulate one job (runs in a worker process)."""
    from gesscale.policies.base import load_plugin
    from gesscale.scenario import load_scenario
    from gesscale.simulate import run_once

    for spec in job.plugins:
        load_plugin(spec)
    sc = load_scenario(job.scenario_path)
    result = run_once(sc, job.policy, job.seed)
    out = JobResult(sc.name, job.policy, job.seed, result.metrics.to_dict(), sc.control_period_s)
    if job.keep_series:
        step = max(1, int(round(sc.control_period_s)))
        out.supply = [int(v) for v in result.supply[::step]]
        out.demand = [int(v) for v in np.asarray(result.demand)[::step]]
    return out


def plan_jobs(scenario_paths: Sequence[Path], policies: Sequence[str], seeds: int) -> list[Job]:
    """Every (scenario, policy, seed); each scenario's own seed first, and its first seed keeps the series.

    Seeds are scenario.seed, +1, ... as in `gesscale simulate`.
    """
    from gesscale.policies.base import loaded_plugins
    from gesscale.scenario import load_scenario

    plugins = tuple(loaded_plugins())
    jobs = []
    for path in scenario_paths:
        base = load_scenario(path).seed  # also validates every file before any work starts
        for pid in policies:
            for i in range(seeds):
                jobs.append(Job(str(path), pid, base + i, keep_series=i == 0, plugins=plugins))
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


def best_policies(per_policy: Mapping[str, Mapping[str, float]], key: str) -> set[str]:
    """The policies with the best value of `key` (lowest; jitter: closest to 0), references excluded."""
    contenders = {p: m for p, m in per_policy.items() if p not in REFERENCE_POLICIES}
    if len(contenders) < 2:
        return set()

    def score(m: Mapping[str, float]) -> float:
        return abs(m[key]) if key == "jitter" else m[key]

    best = min(score(m) for m in contenders.values())
    return {p for p, m in contenders.items() if abs(score(m) - best) <= 1e-12 * max(1.0, abs(best))}


def _cell(key: str, value: float) -> str:
    if key in ("reconfigurations",):
        return f"{value:.0f}"
    if key in ("cost", "max_backlog"):
        return f"{value:,.0f}"
    if key == "excess_time":
        return f"{value:.4f}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def matrix_markdown(matrix: Mapping[str, Mapping[str, Mapping[str, float]]], seeds: int) -> str:
    """One Markdown table per metric: policies (rows) × scenarios (columns), best of each column in bold."""
    scenarios = list(matrix)
    policies = sorted({p for per in matrix.values() for p in per})
    lines = [
        "# Comparison matrix",
        "",
        f"Medians over {seeds} seed(s) per cell. Best value of each scenario in **bold** (lowest; jitter: closest"
        f" to 0); the reference policies ({', '.join(REFERENCE_POLICIES)}) are never marked. Metric definitions:"
        " shared/DESIGN.md §4.",
    ]
    for key in METRIC_KEYS:
        lines += ["", f"## {key} ({TITLES[key]})", ""]
        lines.append("| policy | " + " | ".join(scenarios) + " |")
        lines.append("|---|" + "---:|" * len(scenarios))
        bests = {sc: best_policies(matrix[sc], key) for sc in scenarios}
        for pid in policies:
            cells = []
            for sc in scenarios:
                m = matrix[sc].get(pid)
                if m is None:
                    cells.append("–")
                    continue
                text = _cell(key, m[key])
                cells.append(f"**{text}**" if pid in bests[sc] else text)
            lines.append(f"| {pid} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def series_by_scenario(results: Sequence[JobResult]) -> dict[str, dict[str, tuple[list[int], list[int]]]]:
    """scenario → policy → (supply, demand) of the runs that kept their series (the first seed)."""
    out: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    for r in results:
        if r.supply:
            out.setdefault(r.scenario, {})[r.policy] = (r.supply, r.demand)
    return out


def write_outputs(results: Sequence[JobResult], out_dir: str | Path, seeds: int, workers: int = 1) -> list[Path]:
    """matrix.json, matrix.md, the two heatmaps and one replicas-over-time PNG per scenario; returns the paths.

    The figures are drawn on `workers` processes (matplotlib is the slow part once the runs are done).
    """
    from gesscale.compare_plots import heatmap, normalised_cost, replicas_plot
    from gesscale.report import write_json

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {out}: {err.strerror}") from None
    matrix = summarise(results)
    paths = [write_json(out / "matrix.json", matrix)]
    md = out / "matrix.md"
    md.write_text(matrix_markdown(matrix, seeds))
    paths.append(md)
    excess = {sc: {p: m["excess_time"] for p, m in per.items()} for sc, per in matrix.items()}
    period = {r.scenario: r.period_s for r in results}
    figures: list[tuple[Callable[..., Path], tuple[object, ...], dict[str, object]]] = [
        (heatmap, (normalised_cost(matrix), "cost / ideal cost (medians)", out / "heatmap-cost.png"), {}),
        (heatmap, (excess, "excess time (fraction of the input duration, medians)", out / "heatmap-excess.png"),
         {"fmt": "{:.3f}", "power": 0.3}),
    ]
    for sc, series in series_by_scenario(results).items():
        figures.append((replicas_plot, (sc, series, period[sc], out / f"replicas-{sc}.png"), {}))
    if workers <= 1:
        return paths + [fn(*args, **kwargs) for fn, args, kwargs in figures]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, *args, **kwargs) for fn, args, kwargs in figures]
        return paths + [f.result() for f in futures]
