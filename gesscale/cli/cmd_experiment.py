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
        `environment: local` runs each policy live on a fresh fog-in-a-box testbed (minutes each; run it as root);
        `k8s` is not built yet."""
        from gesscale.experiment.bundle import run_experiment
        from gesscale.experiment.spec import load_spec, scenario_of
        from gesscale.simulate import with_references

        console = Console(width=None if Console().is_terminal else 160)
        err = Console(stderr=True)
        exp = load_spec(spec)
        if exp.environment == "local":
            from gesscale.experiment.live import run_live_experiment

            out.mkdir(parents=True, exist_ok=True)
            paths = run_live_experiment(exp, out, ["gesscale", *sys.argv[1:]],
                                        say=lambda m: err.print(m, markup=False, highlight=False))
            console.print(f"wrote {len(paths)} files into {out}; open {out / 'report.html'}")
            return
        sc = scenario_of(exp)
        for warning in sc.warnings:
            err.print(f"gesscale: warning: {sc.source}: {warning}", highlight=False, soft_wrap=True)
        total = len(with_references(list(exp.policies))) * exp.seeds
        with run_progress(err) as bar:
            task = bar.add_task(f"experiment {exp.name} ({exp.environment})", total=total)
            paths = run_experiment(exp, out, ["gesscale", *sys.argv[1:]],
                                   progress=lambda pid, seed: bar.advance(task))
        console.print(f"wrote {len(paths)} files into {out}; open {out / 'report.html'}")

    @group.command("replay")
    def replay(
        bundle: Path = typer.Argument(..., exists=True, file_okay=False, help="A bundle of `experiment run`."),
        policies: str = typer.Option("", "--policies", "-p", help="Policies to run besides the bundle's own "
                                     "(comma-separated ids)."),
        out: Path | None = typer.Option(None, "--out", "-o", help="Bundle of the replay [default: BUNDLE/replay]."),
    ) -> None:
        """Run a simulator bundle again from its resolved spec: check that the input has the recorded SHA-256 and
        that every recorded run gives the same metrics, and run the extra --policies beside them (exit 1 when
        something did not reproduce). For a live bundle (environment: local): run each live run's simulated twin
        (the scenario calibrated from it) with its policy, the bundle's sim_policies and --policies, and write
        the live and simulated figures side by side (twins.md)."""
        from gesscale.experiment.bundle import run_experiment
        from gesscale.experiment.replay import check_replay, is_live_bundle, replay_live, spec_of_bundle
        from gesscale.policies.base import parse_policy_list
        from gesscale.simulate import with_references

        console = Console(width=None if Console().is_terminal else 160)
        err = Console(stderr=True)
        extra = parse_policy_list(policies) if policies.strip() else []
        if (bundle / "spec.resolved.json").is_file() and is_live_bundle(bundle):
            target = out or bundle / "replay"
            replay_live(bundle, extra, target)
            console.print((target / "twins.md").read_text())
            console.print(f"wrote {target / 'metrics.json'} and {target / 'twins.md'}")
            return
        exp = spec_of_bundle(bundle, extra)
        target = out or bundle / "replay"
        total = len(with_references(list(exp.policies))) * exp.seeds
        with run_progress(err) as bar:
            task = bar.add_task(f"replaying {bundle}", total=total)
            paths = run_experiment(exp, target, ["gesscale", *sys.argv[1:]],
                                   progress=lambda pid, seed: bar.advance(task))
        seeds, lines = check_replay(bundle, target)
        console.print(f"wrote {len(paths)} files into {target}; open {target / 'report.html'}")
        if seeds:
            console.print(f"input differs from the bundle's on seed(s) {', '.join(seeds)}")
        for line in lines:
            console.print(f"not reproduced: {line}")
        if seeds or lines:
            raise typer.Exit(1)
        console.print("reproduced: the same input (SHA-256 per seed) and the same metrics for every recorded run")
