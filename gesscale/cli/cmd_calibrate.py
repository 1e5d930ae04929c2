"""`gesscale calibrate`: measure MST per configuration by controlled injection and fit the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from gesscale.cli.controller_flags import single_flag
from gesscale.cli.query_option import checked_query, query_option
from gesscale.cli.ranges import MAX_ROWS_PER_BATCH, local_range, number_range
from gesscale.cli.signals import sigterm_as_interrupt
from gesscale.cli.wan_options import site_option, wan_option
from gesscale.config import DAY_S
from gesscale.errors import UserError

BACKENDS = ("sim", "local")
MAX_PROBE_STEPS = 1000  # rates tried per configuration (a dichotomy: 20 reach 1e-6 of the first bracket)


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--replicas takes comma-separated integers, got {text!r}") from None
    if not values:
        raise UserError("--replicas is empty")
    return values


def _params(backend: str, overrides: dict[str, Any]) -> Any:
    """The probe's knobs: the simulator's defaults or the live ones, with the flags given (each within the range
    its flag declares)."""
    from dataclasses import replace

    from gesscale.probe import ProbeParams

    if backend == "local":
        from gesscale.testbed.probe_target import LIVE_PARAMS

        base = LIVE_PARAMS
    else:
        base = ProbeParams()
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(base, **given)


def register(app: typer.Typer) -> None:
    """Add the `calibrate` command."""

    @app.command("calibrate")
    def calibrate_cmd(
        ctx: typer.Context,
        backend: str = typer.Option("sim", "--backend", help="Where to measure: sim (the scenario's ground truth) "
                                    "or local (the real Spark job on a fog testbed brought up on this machine)."),
        scenario: Path = typer.Option(
            Path("scenarios/pi10-taxi.yaml"), "--scenario", help="sim: the scenario (cluster and ground truth)."
        ),
        replicas: str = typer.Option("1,2,3,4", "--replicas", help="Replica counts to measure, e.g. 1,2,3,4."),
        placements: str = typer.Option(
            "near,far", "--placements", help="near (min ND_max, as the controller places) and/or far (max ND_max)."
        ),
        out: Path = typer.Option(Path("out/model.json"), "--out", help="Model file to write."),
        seed: int = single_flag("seed", help="sim: seed of the simulator's capacity noise (the controller "
                                "option `seed`; calibrate runs no controller, so takes no other option)."),
        observe_s: float | None = typer.Option(None, "--observe-s", **number_range(0, DAY_S, lo_open=True),
                                               help="Observation phase per tried rate (s) (default: sim 60, "
                                               "local 15)."),
        inject_s: float | None = typer.Option(None, "--inject-s", **number_range(0, DAY_S, lo_open=True),
                                              help="Injection phase before observing (s) (default: sim 60, local 5)."),
        cooldown_s: float | None = typer.Option(None, "--cooldown-s", **number_range(0, DAY_S),
                                                help="Cool-down before each tried rate (s; local: at most this long, "
                                                "until the backlog is drained; 0: none) (default: sim 30, local 30)."),
        tolerance: float | None = typer.Option(None, "--tolerance", **number_range(0, 1, lo_open=True, hi_open=True),
                                               help="A rate succeeds when the processed rate is within this fraction "
                                               "of it and the backlog grew by at most this fraction of the input "
                                               "(default: sim 0.01 with backlog 0.001, local 0.05 for both)."),
        precision: float | None = typer.Option(None, "--precision", **number_range(0, 1, lo_open=True, hi_open=True),
                                               help="Stop when (hi - lo) / hi is below this once a rate failed "
                                               "(default: sim 0.01, local 0.15)."),
        max_steps: int | None = typer.Option(None, "--max-steps", **number_range(1, MAX_PROBE_STEPS),
                                             help="Most rates tried per configuration (default: sim 20, local 3)."),
        measure_again: bool = typer.Option(True, "--measure-again/--no-measure-again",
                                           help="Measure once more a configuration whose search never failed (a "
                                           "lower bound only: up to twice the top) or ran out of steps with its "
                                           "bracket wider than --precision (inside that bracket)."),
        latency_map: Path | None = typer.Option(None, "--latency-map", exists=True, help="local: latency map "
                                                "naming the fog nodes (default: inventory/latency/fog9.yaml)."),
        node_cpu: float = typer.Option(0.25, "--node-cpu", **local_range("node_cpu"),
                                       help="local: CPU budget of each fog node (cores)."),
        max_rows_per_batch: int = typer.Option(2000, "--max-rows-per-batch", **number_range(10, MAX_ROWS_PER_BATCH),
                                               help="local: the job's admission control (records per micro-batch); "
                                               "the model holds for this."),
        run_dir: Path = typer.Option(Path("out/calibrate"), "--run-dir", help="local: folder of the testbed "
                                     "(logs, the job's batches.jsonl)."),
        job_warmup_s: float = typer.Option(45.0, "--job-warmup-s", **number_range(0, DAY_S),
                                           help="local: keep the fresh job saturated at least this long before the "
                                           "first measurement, and on (up to 3x) until its micro-batches stop "
                                           "getting faster (JIT warm-up; 0: none)."),
        port_shift: int = typer.Option(0, "--port-shift", **local_range("port_shift"),
                                       help="local: added to every testbed port (run beside another testbed)."),
        wan: bool = wan_option(True, "local: "),
        site: str | None = site_option("local: "),
        query: str | None = query_option("local: ", default=None),
        model_form: str = typer.Option("auto", "--model-form", help="Form of the model fitted: paper, auto (the "
                                       "form with the smallest leave-one-out error once 5 configurations are "
                                       "measured, the paper's before), per-replica, proportional or per-batch "
                                       "(docs/calibration.md)."),
        model_latency: str = typer.Option("nd_max", "--model-latency", help="What the points' latency is: nd_max "
                                          "(the largest RTT among the replicas, the paper's) or site (the largest "
                                          "RTT from a replica to the site of broker and driver: local, the WAN's "
                                          "site; sim, the scenario's cluster.site). A controller takes the model "
                                          "with the same --model-latency (docs/calibration.md)."),
    ) -> None:
        """Measure the MST of each configuration (StreamBed-style dichotomous search), fit the model (its form by
        --model-form), and report each measurement with its spread, each form's leave-one-out error and the
        model's error on a held-out configuration.

        With --backend local a testbed (broker, Spark master, the fog nodes the configurations use, the job) is
        brought up in --run-dir and torn down at the end, also on Ctrl-C; with the defaults it took about a
        minute per configuration here, plus about 80 s of setup and job warm-up. The model file's `model` entry
        is what `gesscale run --model` and `gesscale simulate --model` start from. See docs/calibration.md.

        Calibration runs no controller: of the controller options (`gesscale options`) it takes only --seed
        and --model-form (here auto by default: a calibration measures the points that tell the forms apart).
        """
        from gesscale.model import FORM_CHOICES
        from gesscale.probe import configurations

        if model_form not in FORM_CHOICES:
            raise UserError(f"--model-form must be one of {', '.join(FORM_CHOICES)}, got {model_form!r}")
        from gesscale.model import MODEL_LATENCIES

        if model_latency not in MODEL_LATENCIES:
            raise UserError(f"--model-latency must be one of {', '.join(MODEL_LATENCIES)}, got {model_latency!r}")
        if backend not in BACKENDS:
            raise UserError(f"backend {backend!r} is not available for calibrate; use sim or local "
                            "(k8s: not yet, see docs/calibration.md)")
        params = _params(backend, {"observe_s": observe_s, "inject_s": inject_s, "cooldown_s": cooldown_s,
                                   "tolerance": tolerance,
                                   "backlog_tolerance": tolerance if backend == "local" else None,
                                   "precision": precision, "max_steps": max_steps, "measure_again": measure_again})
        kinds = [k.strip() for k in placements.split(",") if k.strip()]
        console = Console(soft_wrap=True)
        if backend == "sim" and query is not None:
            raise UserError("--query applies to --backend local (the simulator has no query, only its ground truth)")
        _refuse_other_backend(ctx, backend)
        if backend == "sim":
            from gesscale.probe import SimProbeTarget, calibrate
            from gesscale.scenario import load_scenario

            sc = load_scenario(scenario)
            configs = configurations(sc.latency_map, _ints(replicas), kinds)
            title = f"Capacity probe on {sc.name} (sim)"
            if model_latency == "site" and sc.site is None:
                raise UserError(f"--model-latency site: the scenario {sc.source} has no cluster.site")
            cal = calibrate(SimProbeTarget(sc.truth, sc.latency_map, seed, site=sc.site), sc.latency_map, configs,
                            params, progress=lambda r: console.print(_measured(r)), form=model_form,
                            latency=model_latency, site=sc.site)
            timings: dict[str, float] = {}
        else:
            from gesscale.latency_map import load_latency_map
            from gesscale.testbed import DEFAULT_MAP
            from gesscale.testbed.calibration import LocalCalibrationOptions, calibrate_local

            lmap = load_latency_map(latency_map or DEFAULT_MAP)
            configs = configurations(lmap, _ints(replicas), kinds)
            opts = LocalCalibrationOptions(run_dir=run_dir, node_cpu=node_cpu, max_rows_per_batch=max_rows_per_batch,
                                           port_shift=port_shift, job_warmup_s=job_warmup_s, wan=wan, site=site,
                                           query=checked_query(query))
            opts.validate()
            _check_out(out)
            title = f"Capacity probe on the local testbed ({node_cpu:g} core per fog node)"
            sigterm_as_interrupt()
            console.print(f"measuring {len(configs)} configurations: "
                          + "; ".join(",".join(c) for c in configs))

            def on_step(s: dict[str, float]) -> None:
                console.print(f"    rate {s['rate']:.0f}/s: processed {s['processed']:.0f}/s, backlog "
                              f"{s['growth']:+.0f} -> {'sustained' if s['ok'] else 'not sustained'}")

            cal, timings = calibrate_local(opts, lmap, configs, params, progress=lambda r: console.print(_measured(r)),
                                           say=console.print, on_step=on_step, form=model_form,
                                           latency=model_latency)
        _report(console, title, cal)
        doc = cal.to_dict()
        doc["backend"] = backend
        if backend == "local":
            doc["query"] = opts.query
        doc["params"] = params.__dict__ | {"backlog_tolerance": params.growth_tolerance}
        if timings:
            doc["timings_s"] = {k: round(v, 1) for k, v in timings.items()}
            console.print("took " + ", ".join(f"{k[:-2]} {v:.0f} s" for k, v in timings.items()))
        _write(out, doc)
        console.print(f"wrote {out}")


def _measured(r: Any) -> str:
    bound = "" if r.bounded else ", no tried rate failed: a lower bound"
    return (f"  measured n={r.n} ({','.join(r.nodes)}) ND_max={r.nd_max_ms:.1f} ms: MST {r.mst:.1f}/s "
            f"(spread {r.spread:.1%}) after {len(r.steps)} rates{bound}")


def _report(console: Console, title: str, cal: Any) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("n", "nodes", "ND_max ms", "MST /s", "spread", "model /s"):
        table.add_column(col, justify="right" if col != "nodes" else "left")
    for r in cal.results:
        mst = f"{r.mst:.1f}" if r.bounded else f"≥ {r.mst:.1f}"
        table.add_row(str(r.n), ",".join(r.nodes), f"{r.nd_max_ms:.1f}", mst, f"{r.spread:.1%}",
                      f"{cal.model.predict(r.n, r.nd_max_ms):.1f}")
    from gesscale.cli.tables import print_table

    print_table(console, table)
    m = cal.model
    if m.is_fitted:
        from gesscale.model import FORMS

        form = FORMS[m.form_]
        value = m.delta_ if form.latency_param == "delta" else m.gamma_
        digits = 6 if form.latency_param == "delta" else 4
        latency = f"{form.latency_param}={value:.{digits}f}: MST = {form.describe(m.alpha_, m.beta_, value)}"
        console.print(f"fit: form {m.form_} ({m.form_reason_}): alpha={m.alpha_:.3f} beta={m.beta_:.3f} {latency} "
                      f"({m.n_params_} parameters)")
        loo = m.loo_errors()
        if loo:
            lt = Table(title="leave-one-out error per form (each configuration predicted from the others)",
                       title_justify="left")
            for col in ("form", "median |error|", "max |error|", "rms"):
                lt.add_column(col, justify="left" if col == "form" else "right")
            for form, v in loo.items():
                lt.add_row(form + (" (chosen)" if form == m.form_ else ""), f"{v['median_abs']:.1%}",
                           f"{v['max_abs']:.1%}", f"{v['rms']:.1%}")
            console.print(lt)
    else:
        console.print("fit: none (no configuration sustained any rate)")
    if cal.holdout:
        h = cal.holdout
        console.print(f"held-out n={h['n']} ND_max={h['nd_max_ms']:.1f} ms: measured {h['measured']:.1f}, "
                      f"predicted {h['predicted']:.1f} ({h['error']:+.1%}; form {h.get('form', 'paper')})")
    else:
        console.print("held-out check: needs at least 4 measured configurations")
    limited = [r for r in cal.results if r.machine_limited]
    if limited:
        which = ", ".join(f"n={r.n}" for r in limited)
        console.print(f"note: at {which} the injector fell short of a tried rate: this machine (which also runs the "
                      "broker, the driver and the injector) was the bottleneck, so that MST may be the machine's "
                      "ceiling rather than the configuration's (\"machine_limited\" in the file)")


# Options that only one backend reads (their help starts with it): given with the other, they would be ignored.
_ONLY = {"sim": ("scenario", "seed"),
         "local": ("latency_map", "node_cpu", "max_rows_per_batch", "run_dir", "job_warmup_s", "port_shift", "wan",
                   "site")}


def _refuse_other_backend(ctx: typer.Context, backend: str) -> None:
    """One line for an option of the other backend given on the command line (it would be silently ignored)."""
    for other, names in _ONLY.items():
        if other == backend:
            continue
        for name in names:
            source = ctx.get_parameter_source(name)
            if source is not None and source.name == "COMMANDLINE":
                param = next(p for p in ctx.command.params if p.name == name)
                raise UserError(f"{param.opts[0]} applies to --backend {other} only; --backend {backend} "
                                "would ignore it")


def _check_out(out: Path) -> None:
    """Fail before a long live run when the model file cannot be written."""
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise UserError(f"--out {out} is a directory")
    if parent.exists() and not parent.is_dir():
        raise UserError(f"cannot write {out}: {parent} is not a directory")


def _write(out: Path, doc: dict[str, Any]) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as ex:
        raise UserError(f"cannot write {out}: {ex.strerror}") from None
