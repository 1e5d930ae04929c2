"""`gesscale compare`: every policy on every scenario of a folder, in parallel, as a matrix with plots."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from gesscale.cli.controller_flags import controller_flags
from gesscale.cli.progress import run_progress
from gesscale.cli.ranges import MAX_WORKERS, SEEDS, number_range

WIDE_TABLE_SCENARIOS = 10  # beyond this many scenarios a column each no longer fits a terminal


def _summary_table(matrix: dict, key: str, title: str, regret: dict) -> Table:
    from gesscale.compare import _cell, best_policies
    from gesscale.regret import failing, fmt_ratio

    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    scenarios = list(matrix)
    for sc in scenarios:
        table.add_column(sc.removeprefix("pi10-"), justify="right")
    policies = sorted({p for per in matrix.values() for p in per})
    ranked = all(key in m for per in matrix.values() for m in per.values())  # a metric, not a regret column
    bests = {sc: best_policies(matrix[sc], key, regret.get(sc)) if ranked else set() for sc in scenarios}
    for pid in policies:
        cells = []
        for sc in scenarios:
            m = matrix[sc].get(pid)
            row = regret.get(sc, {}).get(pid, {})
            if m is None:
                text = "–"
            elif key in m:
                text = _cell(key, m[key])
            else:
                text = fmt_ratio(row.get(key))
            if failing(row):
                text = f"[red]{text} FAIL[/red]"
            cells.append(f"[bold]{text}[/bold]" if pid in bests[sc] else text)
        table.add_row(pid, *cells)
    return table


def _distribution_table(regret: dict) -> Table:
    from gesscale.regret import distribution, fmt_diff, fmt_ratio, fmt_share

    table = Table(title="over the scenarios: median and p95 of each scenario's median over its seeds",
                  title_justify="left", header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    for name in ("cost/optimal", "p95", "excess − optimal's", "p95", "late", "p95", "FAIL scenarios"):
        table.add_column(name, justify="right")
    for pid, row in distribution(regret).items():
        table.add_row(pid, fmt_ratio(row["cost_vs_optimal_median"]), fmt_ratio(row["cost_vs_optimal_p95"]),
                      fmt_diff(row["excess_vs_optimal_median"]), fmt_diff(row["excess_vs_optimal_p95"]),
                      fmt_share(row["late_median"]), fmt_share(row["late_p95"]),
                      f"{row['failing']} of {row['scenarios']}")
    return table


def register(app: typer.Typer) -> None:
    """Add the `compare` command."""

    @app.command("compare")
    @controller_flags("sim")
    def compare(
        scenarios: Path = typer.Option(
            Path("scenarios"), "--scenarios", "-s",
            help="Folder of scenario YAML files (every *.yaml is run), or one scenario file.",
        ),
        policies: str = typer.Option(
            "all", "--policies", "-p", help="Comma-separated policy ids, 'all', or 'help' to list them."
        ),
        seeds: int = typer.Option(3, "--seeds", "-n", **number_range(*SEEDS),
                                   help="Runs per policy and scenario (medians are kept)."),
        out: Path = typer.Option(
            Path("out/compare"), "--out", "-o",
            help="Output folder: matrix.json, matrix.md, heatmap-*, regret-boxplots and replicas-<scenario> figures"
            " (each .png, .svg, .pdf).",
        ),
        timeseries: Path | None = typer.Option(
            None, "--timeseries", help="Folder for per-period time series of each (scenario, policy)'s first seed:"
            " <scenario>-<policy>.csv.",
        ),
        workers: int = typer.Option(
            0, "--workers", "-j", **number_range(0, MAX_WORKERS),
            help="Worker processes (0: one per CPU core; 1: no pool)."
        ),
        wide: bool = typer.Option(
            False, "--wide", help="Print the tables at their full width; by default a table wider than the "
            "terminal (COLUMNS; 80 when piped) is stacked into parts that fit.",
        ),
        controller: dict[str, Any] | None = None,
        policy_option_args: list[str] | None = None,
    ) -> None:
        """Run every policy on every scenario of a folder and write the comparison matrix.

        One simulation per (scenario, policy, seed), spread over worker processes, with a progress bar.

        Writes matrix.json (scenario → policy → metrics of docs/metrics.md, medians over seeds) and matrix.md.

        matrix.md has one table per metric; the best value of each scenario is in bold. regret.json and
        regret-distribution.json hold each policy's cost / optimal, excess − optimal's and late share (records
        held longer than optimal's 300 s), per scenario and as median and p95 over the scenarios (printed; with
        more than 10 scenarios only that table is printed).

        Figures (each as .png at 300 dpi, .svg and .pdf; docs/figures.md): heatmap-cost (cost / ideal cost),
        heatmap-excess, regret-boxplots, replicas-<scenario>.

        Controller options (--control-period, --warmup, ...) replace every scenario's; policy options
        (--policy-option [POLICY.]KEY=VALUE) those of each scenario's `policy_options:` (`gesscale options`).
        """
        from gesscale.cli.cmd_simulate import print_policy_list
        from gesscale.cli.tables import output_console, print_table
        from gesscale.compare import find_scenarios, plan_jobs, regret_by_scenario, run_matrix, summarise, write_outputs
        from gesscale.options import parse_policy_option_args
        from gesscale.policies.base import parse_policy_list
        from gesscale.simulate import with_references

        console = output_console()
        err = Console(stderr=True)
        if policies.strip() == "help":
            console.print("Policies:")
            print_policy_list(console)
            return
        from gesscale.cli.outputs import check_output_dir

        check_output_dir(out, "--out")  # before the runs, not after them
        check_output_dir(timeseries, "--timeseries")
        ids = parse_policy_list(policies)
        files = find_scenarios(scenarios)
        run_ids = with_references(ids)  # optimal and ideal always run: the regret is against them
        popts = parse_policy_option_args(policy_option_args or [], ids)
        jobs = plan_jobs(files, run_ids, seeds, controller or {}, popts)
        n_workers = workers or os.cpu_count() or 1
        started = time.monotonic()
        with run_progress(err, transient=False) as bar:
            task = bar.add_task(f"{len(files)} scenarios × {len(run_ids)} policies × {seeds} seeds", total=len(jobs))
            results = run_matrix(jobs, n_workers, progress=lambda r: bar.advance(task))
        simulated = time.monotonic() - started
        for line in dict.fromkeys(f"{r.scenario}: {w}" for r in results for w in r.warnings):
            err.print(f"gesscale: warning: {line}", highlight=False, soft_wrap=True)
        paths = write_outputs(results, out, seeds, n_workers, requested=ids)
        if timeseries is not None:
            from gesscale.compare import write_timeseries

            paths += write_timeseries(results, timeseries)
        matrix = summarise(results)
        regret = regret_by_scenario(results)
        if len(matrix) <= WIDE_TABLE_SCENARIOS:
            for key, title in (("excess_time", "excess_time (medians; best in bold)"),
                               ("cost", "cost in replica-minutes (medians; best in bold)"),
                               ("cost_vs_optimal", "cost / optimal's on the same seed (medians)")):
                print_table(console, _summary_table(matrix, key, title, regret), wide)
        else:
            console.print(f"{len(matrix)} scenarios: the per-scenario tables are in {out / 'matrix.md'}")
        if len(matrix) > 1:
            print_table(console, _distribution_table(regret), wide)
        console.print("FAIL: some seed left a backlog it never drained (its cost is not comparable). optimal: the "
                      "cheapest schedule that pays every pause, excess 0, every record within 300 s; late: the share "
                      "of records a policy held longer than that (cheaper than optimal only by late records).")
        console.print(
            f"{len(jobs)} runs on {n_workers} worker(s): simulated in {simulated:.1f}s, "
            f"total {time.monotonic() - started:.1f}s"
        )
        for p in paths:
            console.print(f"wrote {p}")
