"""`gesscale compare`: every policy on every scenario of a folder, in parallel, as a matrix with plots."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gesscale.cli.progress import run_progress


def _summary_table(matrix: dict, key: str, title: str) -> Table:
    from gesscale.compare import _cell, best_policies

    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    scenarios = list(matrix)
    for sc in scenarios:
        table.add_column(sc.removeprefix("pi10-"), justify="right")
    policies = sorted({p for per in matrix.values() for p in per})
    bests = {sc: best_policies(matrix[sc], key) for sc in scenarios}
    for pid in policies:
        cells = []
        for sc in scenarios:
            m = matrix[sc].get(pid)
            text = "–" if m is None else _cell(key, m[key])
            cells.append(f"[bold]{text}[/bold]" if pid in bests[sc] else text)
        table.add_row(pid, *cells)
    return table


def register(app: typer.Typer) -> None:
    """Add the `compare` command."""

    @app.command("compare")
    def compare(
        scenarios: Path = typer.Option(
            Path("scenarios"), "--scenarios", "-s", help="Folder of scenario YAML files; every *.yaml is run."
        ),
        policies: str = typer.Option(
            "all", "--policies", "-p", help="Comma-separated policy ids, 'all', or 'help' to list them."
        ),
        seeds: int = typer.Option(3, "--seeds", "-n", min=1, help="Runs per policy and scenario (medians are kept)."),
        out: Path = typer.Option(
            Path("out/compare"), "--out", "-o",
            help="Output folder: matrix.json, matrix.md, heatmap-*.png, replicas-<scenario>.png.",
        ),
        workers: int = typer.Option(
            0, "--workers", "-j", min=0, help="Worker processes (0: one per CPU core; 1: no pool)."
        ),
    ) -> None:
        """Run every policy on every scenario of a folder and write the comparison matrix.

        One simulation per (scenario, policy, seed), spread over worker processes, with a progress bar.

        Writes matrix.json (scenario → policy → DESIGN §4 metrics, medians over seeds) and matrix.md.

        matrix.md has one table per metric; the best value of each scenario is in bold.

        Figures: heatmap-cost.png (cost / ideal cost), heatmap-excess.png, replicas-<scenario>.png.
        """
        from gesscale.cli.cmd_simulate import print_policy_list
        from gesscale.compare import find_scenarios, plan_jobs, run_matrix, summarise, write_outputs
        from gesscale.policies.base import parse_policy_list

        console = Console(width=None if Console().is_terminal else 200)
        err = Console(stderr=True)
        if policies.strip() == "help":
            console.print("Policies:")
            print_policy_list(console)
            return
        ids = parse_policy_list(policies)
        files = find_scenarios(scenarios)
        jobs = plan_jobs(files, ids, seeds)
        n_workers = workers or os.cpu_count() or 1
        started = time.monotonic()
        with run_progress(err, transient=False) as bar:
            task = bar.add_task(f"{len(files)} scenarios × {len(ids)} policies × {seeds} seeds", total=len(jobs))
            results = run_matrix(jobs, n_workers, progress=lambda r: bar.advance(task))
        simulated = time.monotonic() - started
        paths = write_outputs(results, out, seeds, n_workers)
        matrix = summarise(results)
        console.print(_summary_table(matrix, "excess_time", "excess_time (medians; best in bold)"))
        console.print(_summary_table(matrix, "cost", "cost in replica-minutes (medians; best in bold)"))
        console.print(
            f"{len(jobs)} runs on {n_workers} worker(s): simulated in {simulated:.1f}s, "
            f"total {time.monotonic() - started:.1f}s"
        )
        for p in paths:
            console.print(f"wrote {p}")
