"""`gesscale calibrate`: measure MST per configuration by controlled injection and fit the model."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gesscale.errors import UserError


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--replicas takes comma-separated integers, got {text!r}") from None
    if not values:
        raise UserError("--replicas is empty")
    return values


def register(app: typer.Typer) -> None:
    """Add the `calibrate` command."""

    @app.command("calibrate")
    def calibrate_cmd(
        backend: str = typer.Option("sim", "--backend", help="Where to measure: sim (the scenario's ground truth)."),
        scenario: Path = typer.Option(
            Path("scenarios/pi10-taxi.yaml"), "--scenario", help="Scenario: the cluster and, for sim, the truth."
        ),
        replicas: str = typer.Option("1,2,3,4", "--replicas", help="Replica counts to measure, e.g. 1,2,3,4."),
        placements: str = typer.Option(
            "near,far", "--placements", help="near (min ND_max, as the controller places) and/or far (max ND_max)."
        ),
        out: Path = typer.Option(Path("out/model.json"), "--out", help="Model file to write."),
        seed: int = typer.Option(1, "--seed", help="Seed of the simulator's capacity noise."),
        observe_s: float = typer.Option(60.0, "--observe-s", help="Observation phase per tried rate (s)."),
        inject_s: float = typer.Option(60.0, "--inject-s", help="Injection phase before observing (s)."),
    ) -> None:
        """Measure the MST of each configuration (StreamBed-style dichotomous search), fit alpha, beta, gamma,
        and report each measurement with its spread and the model's error on a held-out configuration.

        The model file's `model` entry is what the controller starts from (gesscale.model.PerformanceModel).
        """
        from gesscale.probe import ProbeParams, SimProbeTarget, calibrate, configurations
        from gesscale.scenario import load_scenario

        if backend != "sim":
            raise UserError(
                f"backend {backend!r} is not available for calibrate yet; only 'sim' is (see docs/calibration.md)"
            )
        sc = load_scenario(scenario)
        kinds = [k.strip() for k in placements.split(",") if k.strip()]
        configs = configurations(sc.latency_map, _ints(replicas), kinds)
        params = ProbeParams(inject_s=inject_s, observe_s=observe_s)
        console = Console()
        target = SimProbeTarget(sc.truth, sc.latency_map, seed)
        cal = calibrate(target, sc.latency_map, configs, params,
                        progress=lambda r: console.print(f"  measured n={r.n} ND_max={r.nd_max_ms:.1f} ms: "
                                                         f"MST {r.mst:.1f}/s after {len(r.steps)} rates"))
        table = Table(title=f"Capacity probe on {sc.name} ({backend})", title_justify="left")
        for col in ("n", "nodes", "ND_max ms", "MST /s", "spread", "model /s"):
            table.add_column(col, justify="right" if col != "nodes" else "left")
        for r in cal.results:
            table.add_row(str(r.n), ",".join(r.nodes), f"{r.nd_max_ms:.1f}", f"{r.mst:.1f}", f"{r.spread:.1%}",
                          f"{cal.model.predict(r.n, r.nd_max_ms):.1f}")
        console.print(table)
        m = cal.model
        console.print(f"fit: alpha={m.alpha_:.3f} beta={m.beta_:.3f} gamma={m.gamma_:.4f} ({m.n_params_} parameters)")
        if cal.holdout:
            h = cal.holdout
            console.print(f"held-out n={h['n']} ND_max={h['nd_max_ms']:.1f} ms: measured {h['measured']:.1f}, "
                          f"predicted {h['predicted']:.1f} ({h['error']:+.1%})")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(cal.to_dict(), indent=1) + "\n")
        except OSError as ex:
            raise UserError(f"cannot write {out}: {ex.strerror}") from None
        console.print(f"wrote {out}")
