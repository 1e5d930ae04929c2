"""Experiment reports: the Table-III-style metrics table, the JSON of `gesscale simulate`, Figure-7-style plots.

Tables and JSON are built from medians over seeds; plots show one run (the first seed) per policy: the
workload against the throughput, the replicas over time, and the provisioning against the ideal (demand).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.table import Table

from gesscale.metrics import COUNT_KEYS, METRIC_KEYS
from gesscale.regret import REFERENCES, failing, fmt_diff, fmt_ratio, fmt_share, status
from gesscale.simulate import RunResult, median_metrics, regret_of

# Column titles of the table, in the order of METRIC_KEYS (docs/metrics.md).
TITLES = {
    "accuracy_o": "acc_O",
    "accuracy_u": "acc_U",
    "timeshare_o": "ts_O %",
    "timeshare_u": "ts_U %",
    "excess_time": "excess",
    "reconfigurations": "reconf",
    "moves": "moves",
    "cost": "cost (r·min)",
    "instability": "instab %",
    "jitter": "jitter /h",
    "avg_replicas": "avg n",
    "max_backlog": "max backlog",
    "p95_delay_s": "p95 delay s",
}


def summary(results: Mapping[str, list[RunResult]]) -> dict[str, dict[str, float]]:
    """Median metrics per policy."""
    return {pid: median_metrics(runs) for pid, runs in results.items()}


def simulate_json(scenario: str, duration_s: float, results: Mapping[str, list[RunResult]],
                  requested: list[str] | None = None) -> dict[str, Any]:
    """The output document of `gesscale simulate --json` (docs/metrics.md keys, medians over seeds).

    `policies` holds the requested policies; `references` the regret references run only for the regret;
    `regret` every policy's cost and excess against them (`gesscale.regret`), with its failed seeds; `network`,
    only when the controller measured the network (`--latency-source measured|both`), the changes its measured
    view logged (`measured_network`).
    """
    wanted = list(results) if requested is None else requested
    medians = summary(results)
    doc = {
        "scenario": scenario,
        "duration_s": float(duration_s),
        "policies": {p: medians[p] for p in wanted if p in medians},
        "references": {p: medians[p] for p in medians if p not in wanted},
        "regret": regret_of(dict(results)),
        "seeds": {pid: [r.seed for r in runs] for pid, runs in results.items()},
        "latency": simulated_latency(results),
    }
    network = measured_network(results)
    if network is not None:
        doc["network"] = network
    return doc


def measured_network(results: Mapping[str, list[RunResult]]) -> dict[str, Any] | None:
    """What the controller measured of the network, per policy and seed: the source and the changes its view
    logged (`gesscale.measured_latency.LatencyChange`: pair, old and new ms, the period's end); None when every
    run saw the operator's map (`map`, nothing measured)."""
    sources = sorted({r.latency_source for runs in results.values() for r in runs})
    if sources == ["map"] or not sources:
        return None
    from gesscale.measured_latency import CHANGE_THRESHOLD_MS

    return {"latency_source": sources[0] if len(sources) == 1 else sources, "threshold_ms": CHANGE_THRESHOLD_MS,
            "changes": {pid: [{"seed": r.seed, "changes": [c.to_dict() for c in r.latency_changes]} for r in runs]
                        for pid, runs in results.items()}}


def simulated_latency(results: Mapping[str, list[RunResult]]) -> dict[str, Any]:
    """Per policy, the record latency of its runs (`gesscale.latency.simulated`: FIFO, per second of arrival),
    medians over the seeds of each `RUN_KEYS` figure (a figure that is null on a seed, records never processed,
    counts as infinite; an infinite median is null), with the bound and SLO they were judged against."""
    import math
    import statistics

    from gesscale.latency import BOUND_S, RUN_KEYS, SLO_S, simulated

    by_policy: dict[str, dict[str, Any]] = {}
    for pid, runs in results.items():
        per_seed = [simulated(r.input, r.processed, 1.0)[0] for r in runs]
        med: dict[str, Any] = {}
        for k in RUN_KEYS:
            m = statistics.median(math.inf if s[k] is None else s[k] for s in per_seed) if per_seed else None
            med[k] = None if m is None or not math.isfinite(m) else (int(m) if k == "records" else float(m))
        by_policy[pid] = med
    return {"model": "FIFO per second of arrival, each second's records at the wait of the last of them",
            "bound_s": BOUND_S, "slo_s": SLO_S, "by_policy": by_policy}


def write_csv(path: str | Path, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> Path:
    """Write rows (dicts) as a CSV file with a header, creating the folder."""
    import csv

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
    return p


def workload_provenance(workload: Mapping[str, Any]) -> str:
    """Where a scenario's input comes from, for captions: the named trace file, or which synthetic profile.

    The simulator's `taxi` kind is a synthetic diurnal profile (the NYC weekday hourly shape, Poisson
    arrivals), not the recorded trace; captions must say so.
    """
    kind = workload.get("kind", "?")
    if kind == "csv":
        return f"recorded rate file {Path(str(workload.get('path', '?'))).name}"
    if kind == "taxi":
        return (f"synthetic diurnal taxi profile (NYC weekday hourly shape, {workload.get('rides_per_day', 500000):,}"
                f" rides/day, x{workload.get('speed', 10)} speed, x{workload.get('duplication', 3)} duplication;"
                " not the recorded trace)")
    return f"synthetic {kind} profile"


def write_json(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write a JSON document, creating the folder."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=2) + "\n")
    return p


def fmt_count(value: float) -> str:
    """A count, or a median of counts: whole as it is, a half (the median of an even number of seeds) kept, so
    11.5 and 10.5 never show as 12 and 10 beside a ratio computed from the true values."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _fmt(key: str, value: float) -> str:
    if key in COUNT_KEYS:
        return fmt_count(value)
    if key in ("max_backlog", "cost"):
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


REGRET_TITLES = {"cost_vs_optimal": "c/opt", "cost_vs_ideal": "c/ideal", "excess_vs_optimal": "Δexcess"}


def metrics_table(title: str, medians: Mapping[str, Mapping[str, float]],
                  regret: Mapping[str, Mapping[str, float | int | None]] | None = None) -> Table:
    """Policies × metrics, the best value of each column (lowest; jitter: closest to 0) in bold.

    With `regret`, three columns against the references and a status column; failing policies (a backlog never
    drained) and the references are never bold.
    """
    table = Table(title=title, header_style="bold", title_justify="left")
    table.add_column("policy", style="cyan", no_wrap=True)
    for k in METRIC_KEYS:
        table.add_column(TITLES[k], justify="right")
    if regret is not None:
        for title_ in REGRET_TITLES.values():
            table.add_column(title_, justify="right")
        table.add_column("late", justify="right")
        table.add_column("status")
    regret = regret or {}
    ranked = {p: m for p, m in medians.items()
              if not (regret and (p in REFERENCES or p == "static" or failing(regret.get(p, {}))))}
    best: dict[str, float] = {}
    for k in METRIC_KEYS:
        vals = [abs(m[k]) if k == "jitter" else m[k] for m in ranked.values()]
        best[k] = min(vals) if vals else 0.0
    for pid, m in medians.items():
        cells = []
        for k in METRIC_KEYS:
            v = abs(m[k]) if k == "jitter" else m[k]
            text = _fmt(k, m[k])
            cells.append(f"[bold]{text}[/bold]" if len(ranked) > 1 and pid in ranked and v == best[k] else text)
        if regret:
            row = regret.get(pid, {})
            cells += [fmt_ratio(row.get("cost_vs_optimal")), fmt_ratio(row.get("cost_vs_ideal")),
                      fmt_diff(row.get("excess_vs_optimal")), fmt_share(row.get("late"))]
            st = status(row) if row else "–"
            cells.append(f"[red]{st}[/red]" if failing(row) else st)
        table.add_row(pid, *cells)
    return table


def figure7_runs(results: Mapping[str, list[RunResult]], requested: list[str]) -> dict[str, RunResult]:
    """The first run of each requested policy, then of each regret reference that ran (`optimal`, `ideal`):
    the table's c/opt and c/ideal are against them, so the figure shows them too."""
    from gesscale.regret import REFERENCES

    ids = list(requested) + [r for r in REFERENCES if r in results and r not in requested]
    return {pid: results[pid][0] for pid in ids}


def plot_figure7(results: Mapping[str, RunResult], path: str | Path, caption: str = "") -> Path:
    """One Figure-7-style panel of a workload with every policy (one run each, the first seed): a column per
    policy and, on one scale per row, the input against the throughput (1-min means), the replicas in use
    against the ideal count (a triangle where a replica was moved: same count, another node), and the backlog.
    A regret reference among `results` (`optimal`, `ideal`) is titled as one. `caption` (the workload's
    provenance) is printed below. Written as PNG, SVG and PDF (`gesscale.figures.save`); returns the PNG's
    path."""
    import textwrap

    import numpy as np

    from gesscale.figures import ROLE, policy_style, pyplot, save
    from gesscale.regret import REFERENCES

    plt = pyplot()
    policies = list(results)
    cols = len(policies)
    width = max(6.0, 2.5 * cols)
    cap_lines = textwrap.wrap(f"Workload: {caption}", int(width * 16)) if caption else []
    fig, axes = plt.subplots(3, cols, figsize=(width, 6.4 + 0.13 * len(cap_lines)), sharex=True, sharey="row",
                             squeeze=False, layout="constrained")
    win = 60

    def smooth(x: np.ndarray) -> np.ndarray:
        return x if len(x) < win else np.convolve(x, np.ones(win) / win, mode="same")

    for j, pid in enumerate(policies):
        r = results[pid]
        t_min = np.arange(len(r.input)) / 60.0
        top, mid, low = axes[0][j], axes[1][j], axes[2][j]
        top.plot(t_min, smooth(r.input), color=ROLE["input"], lw=0.9, label="input")
        top.plot(t_min, smooth(r.processed), color=ROLE["throughput"], lw=0.9, label="throughput")
        name = pid + (" (reference)" if pid in REFERENCES else "")
        top.set_title(name if r.drained else textwrap.fill(f"{name} (FAIL: never drained)", 22))
        n_in = len(r.demand)
        mid.step(t_min[:n_in], r.demand, where="post", color=ROLE["ideal"], lw=0.8, label="ideal")
        mid.step(t_min, r.supply, where="post", color=policy_style(pid)["color"], lw=1.0, label="replicas")
        moves = [h.reconfiguration for h in r.history if h.applied and h.reconfiguration is not None
                 and h.reconfiguration.kind == "move"]
        if moves:  # a re-placement keeps the count, so the step line does not show it (docs/events.md)
            mid.plot([m.time_s / 60.0 for m in moves], [len(m.nodes) for m in moves], ls="none", marker="v",
                     ms=4, color=ROLE["ideal"], label="move")
            mid.legend(loc="upper left")
        low.fill_between(t_min, r.backlog, color=ROLE["backlog"], alpha=0.35, lw=0, label="backlog")
        low.set_xlabel("time (min)")
    axes[0][0].set_ylabel("records/s (1-min mean)")
    axes[1][0].set_ylabel("replicas")
    axes[2][0].set_ylabel("backlog (records)")
    for row in axes:
        row[0].legend(loc="upper left")
    first = next(iter(results.values()))
    fig.suptitle(f"{first.scenario}: every policy on one scale per row (seed {first.seed})")
    if cap_lines:
        fig.supxlabel("\n".join(cap_lines), fontsize=6)
    return save(fig, path)
