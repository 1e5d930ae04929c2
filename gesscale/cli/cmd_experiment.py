"""`gesscale experiment run SPEC.yaml --out DIR`: one experiment file, one command, one bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from gesscale.cli.progress import run_progress


def register(app: typer.Typer) -> None:
    """Add the `experiment` group."""
    group = typer.Typer(help="Experiments a researcher can publish: a spec file in, a bundle out.",
                        no_args_is_help=True)
    app.add_typer(group, name="experiment")

    @group.command("run")
    def run(
        spec: Path = typer.Argument(..., exists=True, dir_okay=False, help="Experiment file (docs/experiments.md)."),
        out: Path = typer.Option(..., "--out", "-o", help="Bundle folder (created; files in it are replaced)."),
    ) -> None:
        """Run every policy of the experiment file on every seed (environment: sim) and write the bundle:
        resolved spec, environment (versions, commit, machine, input hash), network, per-period time series,
        decision log (model-predicted vs observed MST), metrics, figures, Table III reproduction, report.html.
        `environment: local` and `k8s` are not built yet."""
        from gesscale.experiment.bundle import run_experiment
        from gesscale.experiment.spec import load_spec, scenario_of
        from gesscale.simulate import with_references

        console = Console(width=None if Console().is_terminal else 160)
        err = Console(stderr=True)
        exp = load_spec(spec)
        sc = scenario_of(exp)
        for warning in sc.warnings:
            err.print(f"gesscale: warning: {sc.source}: {warning}", highlight=False, soft_wrap=True)
        total = len(with_references(list(exp.policies))) * exp.seeds
        with run_progress(err) as bar:
            task = bar.add_task(f"experiment {exp.name} ({exp.environment})", total=total)
            paths = run_experiment(exp, out, ["gesscale", *sys.argv[1:]],
                                   progress=lambda pid, seed: bar.advance(task))
        console.print(f"wrote {len(paths)} files into {out}; open {out / 'report.html'}")
