"""`gesscale demo`: the live fog-in-a-box demo (default) or the simulated paper comparison (`--simulated-only`).

Live: the embedded broker, a testbed of fog nodes (Spark workers with cgroup CPU budgets), the producer
replaying a compressed taxi day, the Spark job and the Gesscale controller; then the exactly-once accounting by
unique keys, each reconfiguration with its measured pause, the model against its measurements, a timeline PNG,
the simulator's policy comparison on the run's simulated twin (built from what the run measured), and the
twin against the run with the errors. See docs/testbed.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gesscale.cli.cmd_simulate import DEFAULT_POLICIES
from gesscale.cli.controller_flags import controller_flags
from gesscale.cli.query_option import checked_query, query_option
from gesscale.cli.ranges import SEEDS, local_range, number_range
from gesscale.cli.wan_options import site_option, wan_option
from gesscale.testbed import DEMO_MAP
from gesscale.testbed.demo import DemoOptions

ROOT = Path(__file__).resolve().parents[2]


def _simulated(out: Path, seeds: int, scenario: Path, policies: str) -> None:
    from gesscale.cli import main as cli_main

    typer.echo(f"gesscale demo: simulated comparison on {scenario.name} ({seeds} seeds); outputs in {out}/")
    code = cli_main([
        "simulate", "--scenario", str(scenario), "--policies", policies, "--seeds", str(seeds),
        "--json", str(out / "report.json"), "--plot", str(out),
    ])
    if code:
        raise typer.Exit(code)


def _print_report(report: dict) -> None:
    from rich.table import Table

    from gesscale.cli.fidelity_table import print_decisions, print_fidelity, twin_summary
    from gesscale.cli.tables import output_console, print_table
    from gesscale.report import metrics_table

    console = output_console()
    exact = report["lost"] == 0 and report["duplicated"] == 0
    verdict = "[green]exactly once[/green]" if exact else "[red]NOT exactly once[/red]"
    console.print(f"records produced {report['produced']}, processed {report['processed']}, lost {report['lost']}, "
                  f"duplicated {report['duplicated']} (dead letters {report['dead_letters']}): {verdict}")
    if report.get("basis") == "input offsets":
        console.print(f"  (query {report['options']['query']}: checked on the input offsets, each record in exactly "
                      f"one committed micro-batch; {report['outputs']} output records, each key written once; "
                      f"{report['late']} rows dropped by the query's watermark)")
    load = report.get("load") or {}
    if load:
        console.print(f"load: {load['rides_per_day']} rides in the day, peak {load['peak_rate']:.0f} records/s "
                      f"({load['chosen']})")
    network = report.get("network") or {}
    if network.get("node_events_applied"):  # crashes, leaves, joins: when, and when lost capacity came back
        from gesscale.testbed.controller import node_event_lines

        for line in node_event_lines(network["node_events_applied"], report["reconfigurations"],
                                     network["testbed_t0_unix"]):
            console.print(line)
    if report.get("unprocessed"):
        console.print(f"[yellow]{report['unprocessed']} records were still waiting when the run stopped (time limit; "
                      "raise --drain-timeout); they are neither processed nor lost[/yellow]")
    table = Table(title="reconfigurations (random ND_max: median over seeded random placements of the same size)")
    for col in ("t (s)", "kind", "added", "removed", "nodes", "ND_max ms", "random ND_max ms", "pause s", "reason"):
        table.add_column(col)
    for r in report["reconfigurations"]:
        rnd = r.get("random_nd_max_ms")
        table.add_row(f"{r['time_s'] or 0:.0f}", r["kind"], ",".join(r["added"]), ",".join(r["removed"]),
                      ",".join(r["nodes"]), f"{r['nd_max_ms']:.1f}", "" if rnd is None else f"{rnd:.1f}",
                      f"{r['pause_s']:.1f}", r["reason"])
    print_table(console, table)
    model = report.get("model")
    if model and model["fitted"]:
        from gesscale.model import FORMS

        form = FORMS[model.get("form") or "paper"]
        formula = form.describe(model["alpha"], model["beta"],
                                (model.get("delta") if form.latency_param == "delta" else model["gamma"]) or 0.0)
        console.print(f"model form: {model.get('form', 'paper')} ({model.get('form_reason', '')})"
                      + "".join(f"; leave-one-out rms {f} {v['rms']:.1%}" for f, v in (model.get("loo") or {}).items()))
        mt = Table(title=f"model MST = {formula} vs measured")
        for col in ("n", "ND_max ms", "measured MST", "model"):
            mt.add_column(col, justify="right")
        for m in model["measurements"]:
            mt.add_row(str(m["n"]), f"{m['nd_max_ms']:.1f}", f"{m['mst']:.0f}", f"{m['predicted']:.0f}")
        print_table(console, mt)
    else:
        console.print("model: not fitted (no back-pressured period measured)")
    lat = report.get("latency")
    if lat:
        twin = (report.get("simulated_latency") or {}).get(report["options"]["policy"]) or {}
        console.print(f"record latency ({lat['basis']}, {lat['records']} records of the day): p50 {lat['p50_s']} s, "
                      f"p95 {lat['p95_s']} s, p99 {lat['p99_s']} s, max {lat['max_s']} s; "
                      f"{100 * lat['over_slo_share']:.1f} % above the {lat['slo_s']:g} s SLO, "
                      f"{100 * lat['over_bound_share']:.1f} % above {lat['bound_s']:g} s; simulated twin: p50 "
                      f"{twin.get('p50_s')} s, p95 {twin.get('p95_s')} s, p99 {twin.get('p99_s')} s "
                      f"(per period: report's periods[].latency, every record: {lat.get('records_csv')})")
    console.print(f"timeline: {report['timeline_png']}")
    console.print(twin_summary(report.get("twin")))
    print_table(console, metrics_table("simulator on this run's twin (1 seed)", report["simulation"]))
    if report.get("fidelity"):
        print_fidelity(console, report["fidelity"], f"{report['options']['policy']}: twin against the live run")
    if report.get("twin_decisions"):
        print_decisions(console, report["twin_decisions"])
    console.print(f"timings (s): {report['timings_s']}")


_D = DemoOptions()  # the defaults, written once (gesscale.testbed.demo)


def register(app: typer.Typer) -> None:
    """Add the `demo` command."""

    @app.command("demo")
    @controller_flags("demo")
    def demo(
        out: Path = typer.Option(Path("out/demo"), "--out", help="Folder for the report, the PNGs and the logs."),
        report: Path = typer.Option(None, "--report", help="Report JSON [default: <out>/report.json]."),
        nodes: int = typer.Option(_D.nodes, "--nodes", **local_range("nodes"),
                                   help="Fog nodes of the testbed (1-9; fog1..fogN of the map)."),
        latency_map: Path | None = typer.Option(None, "--latency-map", exists=True, help="Latency map naming the "
                                                "fog nodes and their RTTs (default: "
                                                f"{DEMO_MAP.relative_to(ROOT)}, docs/testbed.md)."),
        node_cpu: float = typer.Option(_D.node_cpu, "--node-cpu", **local_range("node_cpu"),
                                       help="CPU budget of each fog node in cores (cgroup)."),
        policy: str = typer.Option("gesscale", "--policy", help="Controller policy of the live run."),
        strategy: str = typer.Option("live", "--strategy", help="Reconfiguration strategy: live or restart."),
        day: float = typer.Option(_D.day_s, "--day", **local_range("day_s"),
                                  help="Seconds one taxi day is compressed into (run longer with a larger value)."),
        rides_per_day: int = typer.Option(None, "--rides-per-day", **local_range("rides_per_day"),
                                           help="Synthetic rides in the day (x3 records) [default: sized from what "
                                           "one node sustains, see --peak-load]."),
        peak_load: float = typer.Option(_D.peak_load, "--peak-load", **local_range("peak_load"),
                                        help="Without --rides-per-day: the day's peak as a multiple of the records/s "
                                        "one node sustains, measured in the warm-up (2 needs about three nodes)."),
        probe: float = typer.Option(_D.probe_s, "--probe", **local_range("probe_s"),
                                    help="Without --rides-per-day: keep one node saturated at least this long (s) "
                                    "before measuring what it sustains."),
        start_hour: int = typer.Option(_D.start_hour, "--start-hour", **local_range("start_hour"),
                                        help="Hour of the day the replay starts at (0-23)."),
        hours: float = typer.Option(_D.hours, "--hours", **local_range("hours"),
                                    help="Hours of the day replayed from --start-hour (24: the whole day; fewer "
                                    "for a run about one stretch of it, e.g. --start-hour 8 --hours 10)."),
        drain_timeout: float = typer.Option(_D.drain_timeout_s, "--drain-timeout", **local_range("drain_timeout_s"),
                                            help="After the day, wait at most this long for the backlog to drain (s)."),
        sim_policies: str = typer.Option(DEFAULT_POLICIES, "--policies", help="Policies the simulator compares on "
                                         "the run's simulated twin, beside the live policy (also for "
                                         "--simulated-only)."),
        simulated_only: bool = typer.Option(False, "--simulated-only", help="Skip the live run: only the simulated "
                                            "paper comparison (scenarios/pi10-taxi.yaml)."),
        seeds: int = typer.Option(3, "--seeds", **number_range(*SEEDS),
                                  help="--simulated-only: seeds per policy (medians)."),
        scenario: Path = typer.Option(ROOT / "scenarios" / "pi10-taxi.yaml", "--scenario", exists=True,
                                      help="--simulated-only: scenario to run."),
        wan: bool = wan_option(_D.wan),
        site: str | None = site_option(),
        query: str = query_option(),
        view: bool = typer.Option(True, "--view/--no-view", help="Live terminal view of the controller."),
        events: Path | None = typer.Option(
            None, "--events", exists=True, dir_okay=False,
            help="Events file (docs/events.md) of what happens to the fog during the day, t = 0 at the day's "
                 "start: its link changes are applied to the WAN emulation at their times, its partitions and "
                 "flaps cut the pairs' links; the controller's map stays --latency-map (it sees the events only by "
                 "measuring: --latency-source measured|both). Its node events act on the fog nodes: a crash "
                 "kills the node's worker and executors (its replica is lost and replaced), a leave cordons the "
                 "node and removes its replica after the drain, a node joins at its join. What was applied, and "
                 "when: the report's network section."),
        controller: dict[str, Any] | None = None,
        policy_option_args: list[str] | None = None,
    ) -> None:
        """Fog in a box: a real stream, the real Spark job and the Gesscale controller on this machine.

        Controller options (--control-period, --warmup, ...) and policy options of --policy (--policy-option
        KEY=VALUE) are those of `gesscale options`, with this command's defaults.
        """
        if simulated_only:
            _simulated(out, seeds, scenario, sim_policies)
            return

        from rich.console import Console
        from rich.live import Live

        from gesscale.backend import STRATEGIES
        from gesscale.cli.signals import sigterm_as_interrupt
        from gesscale.errors import UserError
        from gesscale.policies.base import make_policy, parse_policy_list
        from gesscale.testbed.demo import run_demo
        from gesscale.testbed.live import LiveView

        if strategy not in STRATEGIES:
            raise UserError(f"--strategy must be one of {', '.join(STRATEGIES)}")
        from gesscale.config import ControllerConfig
        from gesscale.options import parse_policy_option_args

        controller = dict(controller or {})
        popts = parse_policy_option_args(policy_option_args or [], [policy]).get(policy, {})
        make_policy(policy, **popts)
        ControllerConfig(**controller)  # options that contradict each other fail before anything starts
        parse_policy_list(sim_policies)
        query = checked_query(query)

        sigterm_as_interrupt()
        console = Console(soft_wrap=True)
        live_view = LiveView(f"gesscale demo: {policy} ({strategy}) on {nodes} fog nodes")
        listeners = [live_view.on_step]
        if not view or not console.is_terminal:
            listeners.append(lambda r, m: console.print(
                f"t={r.observation.time_s:.0f}s in={r.observation.input_rate:.0f}/s "
                f"done={r.observation.throughput:.0f}/s backlog={r.observation.backlog:.0f} "
                f"n={r.observation.n} -> {r.decision.reason}"))
        opts = DemoOptions(out=out, report=report, nodes=nodes, node_cpu=node_cpu, policy=policy, strategy=strategy,
                           day_s=day, rides_per_day=rides_per_day, peak_load=peak_load, probe_s=probe,
                           start_hour=start_hour, hours=hours,
                           control_period_s=controller.pop("control_period_s"),
                           warmup_s=controller.pop("warmup_s"), drain_timeout_s=drain_timeout,
                           sim_policies=sim_policies, listeners=listeners, wan=wan, site=site, query=query,
                           latency_map=latency_map, events=events,
                           controller=controller, policy_options=popts)
        if view and console.is_terminal:
            with Live(live_view, console=console, refresh_per_second=2):
                result = run_demo(opts, say=console.print)
        else:
            result = run_demo(opts, say=console.print)
        _print_report(result)
        console.print(f"report: {opts.report or opts.out / 'report.json'}")
