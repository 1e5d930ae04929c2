"""`gesscale experiment run SPEC.yaml --out DIR`: one experiment file, one command, one bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from gesscale.cli.progress import run_progress
from gesscale.errors import UserError


def register(app: typer.Typer) -> None:
    """Add the `experiment` group."""
    group = typer.Typer(help="Experiments a researcher can publish: a spec file in, a bundle out.",
                        no_args_is_help=True)
    app.add_typer(group, name="experiment")

    @group.command("run")
    def run(
        spec: Path = typer.Argument(..., exists=True, dir_okay=False, help="Experiment file (docs/experiments.md)."),
        out: Path = typer.Option(..., "--out", "-o", help="Bundle folder: new or empty (see --force, --resume)."),
        force: bool = typer.Option(False, "--force", help="Replace the bundle in --out: remove the files its "
                                   "manifest lists, nothing else (refused if other files are there)."),
        resume: bool = typer.Option(False, "--resume", help="environment: local: continue the interrupted "
                                    "experiment in --out (completed runs are kept, the cut one is redone)."),
    ) -> None:
        """Run every policy of the experiment file on every seed (environment: sim) and write the bundle:
        resolved spec, environment (versions, commit, machine, input hash), network, per-period time series,
        decision log (model-predicted vs observed MST), metrics, figures, Table III reproduction, report.html,
        copies of the inputs (inputs/) and manifest.json (every file written, with its SHA-256).
        `environment: local` runs each policy live on a fresh fog-in-a-box testbed, `repeats` times in interleaved
        blocks, with medians, bootstrap intervals and block-paired comparisons (minutes per run; run it as root);
        `k8s` is not built yet."""
        from gesscale.experiment.bundle import run_experiment
        from gesscale.experiment.spec import load_spec, scenario_of
        from gesscale.simulate import with_references

        console = Console(width=None if Console().is_terminal else 160)
        err = Console(stderr=True)
        exp = load_spec(spec)
        if force and resume:
            raise UserError("--force and --resume exclude each other")
        if exp.environment == "local":
            from gesscale.cli.signals import sigterm_as_interrupt
            from gesscale.experiment.live import run_live_experiment

            sigterm_as_interrupt()  # `kill PID` stops it like Ctrl-C: the run's testbed is torn down, --resume goes on

            paths = run_live_experiment(exp, out, ["gesscale", *sys.argv[1:]],
                                        say=lambda m: err.print(m, markup=False, highlight=False), force=force,
                                        resume=resume)
            console.print(f"wrote {len(paths)} files into {out}; open {out / 'report.html'}")
            return
        if resume:
            raise UserError("--resume is for environment: local (a simulated experiment takes seconds: run it again)")
        sc = scenario_of(exp)
        for warning in sc.warnings:
            err.print(f"gesscale: warning: {sc.source}: {warning}", highlight=False, soft_wrap=True)
        total = len(with_references(list(exp.policies))) * exp.seeds
        with run_progress(err) as bar:
            task = bar.add_task(f"experiment {exp.name} ({exp.environment})", total=total)
            paths = run_experiment(exp, out, ["gesscale", *sys.argv[1:]],
                                   progress=lambda pid, seed: bar.advance(task), force=force)
        console.print(f"wrote {len(paths)} files into {out}; open {out / 'report.html'}")

    @group.command("replay")
    def replay(
        bundle: Path = typer.Argument(..., exists=True, file_okay=False, help="A bundle of `experiment run`."),
        policies: str = typer.Option("", "--policies", "-p", help="Policies to run besides the bundle's own "
                                     "(comma-separated ids)."),
        out: Path | None = typer.Option(None, "--out", "-o", help="Bundle of the replay, new or empty "
                                        "(default: BUNDLE/replay)."),
        force: bool = typer.Option(False, "--force", help="Replace the replay bundle in --out (only the files its "
                                   "manifest lists)."),
        trust_code: bool = typer.Option(False, "--trust-code", help="Load the plug-in policies the bundle carries "
                                        "(inputs/): their code runs on this machine."),
        allow_outside: bool = typer.Option(False, "--allow-outside", help="Follow input paths that lead outside "
                                           "the bundle."),
    ) -> None:
        """Run a simulator bundle again from its resolved spec: check that the input has the recorded SHA-256 and
        that every recorded run gives the same metrics, and run the extra --policies beside them (exit 1 when
        something did not reproduce). For a live bundle (environment: local): run each live run's simulated twin
        (built from what the run measured: the control period achieved, each reconfiguration's effective delay and
        observation gap, the MST points and the capacity its processed records showed, the cold first period, the
        CPU a busy job reported at each size, the input produced; it ends as a demo run ends) with its policy, the
        bundle's sim_policies and --policies; write the live and simulated figures side by side (twins.md) and the
        twin of the live policy against the run with the errors (fidelity.md, printed). A replay reads only the
        bundle's copies of its inputs (checked against their SHA-256), runs no code from the bundle unless
        --trust-code, and writes its own manifest.json."""
        from gesscale.cli.fidelity_table import print_fidelity, twin_summary
        from gesscale.cli.tables import output_console
        from gesscale.experiment.bundle import run_experiment
        from gesscale.experiment.replay import check_replay, is_live_bundle, replay_live, spec_of_bundle
        from gesscale.simulate import with_references

        console = Console(width=None if Console().is_terminal else 160)
        err = Console(stderr=True)
        extra = [p.strip() for p in policies.split(",") if p.strip()]
        argv = ["gesscale", *sys.argv[1:]]
        if (bundle / "spec.resolved.json").is_file() and is_live_bundle(bundle):
            target = out or bundle / "replay"
            doc = replay_live(bundle, extra, target, force=force, allow_outside=allow_outside, argv=argv)
            console.print((target / "twins.md").read_text())
            fitted = output_console()
            for rid, twin in doc["twins"].items():
                fitted.print(twin_summary(twin.get("twin")))
                print_fidelity(fitted, twin["fidelity"], f"{rid}: twin against the live run")
            console.print(f"wrote {target / 'metrics.json'}, {target / 'twins.md'} and {target / 'fidelity.md'}")
            return
        exp = spec_of_bundle(bundle, extra, trust_code=trust_code, allow_outside=allow_outside)
        target = out or bundle / "replay"
        total = len(with_references(list(exp.policies))) * exp.seeds
        with run_progress(err) as bar:
            task = bar.add_task(f"replaying {bundle}", total=total)
            paths = run_experiment(exp, target, argv, progress=lambda pid, seed: bar.advance(task), force=force,
                                   kind="replay")
        seeds, lines = check_replay(bundle, target)
        console.print(f"wrote {len(paths)} files into {target}; open {target / 'report.html'}")
        if seeds:
            console.print(f"input differs from the bundle's on seed(s) {', '.join(seeds)}")
        for line in lines:
            console.print(f"not reproduced: {line}")
        if seeds or lines:
            raise typer.Exit(1)
        console.print("reproduced: the same input (SHA-256 per seed) and the same metrics for every recorded run")
