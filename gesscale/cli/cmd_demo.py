"""`gesscale demo`: the main job on embedded defaults.

Today the demo is the simulated comparison of the Gesscale paper (scenarios/pi10-taxi.yaml): every baseline of
the paper against Gesscale, medians over seeds, the metrics table, a JSON report and one Figure-7-style PNG per
policy. The live fog-in-a-box demo (brokers, Spark job, local testbed) is tracked separately and not part of
this command yet.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gesscale.cli.cmd_simulate import DEFAULT_POLICIES

ROOT = Path(__file__).resolve().parents[2]


def register(app: typer.Typer) -> None:
    """Add the `demo` command."""

    @app.command("demo")
    def demo(
        out: Path = typer.Option(Path("out/demo"), "--out", help="Folder for report.json and the PNGs."),
        seeds: int = typer.Option(3, "--seeds", min=1, help="Seeds per policy (medians are reported)."),
        scenario: Path = typer.Option(
            ROOT / "scenarios" / "pi10-taxi.yaml", "--scenario", help="Scenario to run (default: the paper's)."
        ),
        policies: str = typer.Option(DEFAULT_POLICIES, "--policies", help="Policies to compare ('help' lists)."),
    ) -> None:
        """Run the default simulated comparison (Gesscale vs the paper's baselines) and write the report."""
        from gesscale.cli import main as cli_main

        typer.echo(f"gesscale demo: simulated comparison on {scenario.name} ({seeds} seeds); outputs in {out}/")
        code = cli_main([
            "simulate", "--scenario", str(scenario), "--policies", policies, "--seeds", str(seeds),
            "--json", str(out / "report.json"), "--plot", str(out),
        ])
        if code:
            raise typer.Exit(code)
