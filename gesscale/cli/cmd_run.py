"""`gesscale run --backend local`: the live controller on the real Spark job of the local fog testbed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from gesscale.cli.controller_flags import controller_flags
from gesscale.cli.query_option import checked_query, query_option
from gesscale.cli.ranges import PORT, YEAR_S, local_range, number_range, outside, range_problem
from gesscale.cli.signals import sigterm_as_interrupt
from gesscale.cli.wan_options import site_option, wan_option
from gesscale.errors import UserError

BACKENDS = ("local",)
RUN_DURATION = (0.0, YEAR_S, True, False)  # `--duration` (a text, 5m or 2h: its range is checked here)


def register(app: typer.Typer) -> None:
    """Add the `run` command."""

    @app.command("run")
    @controller_flags("testbed")
    def run(
        backend: str = typer.Option("local", "--backend", help="Where the operator runs: local (Spark standalone "
                                    "fog testbed on this machine). Kubernetes: `gesscale k8s run`; simulator: "
                                    "`gesscale simulate`."),
        policy: str = typer.Option("gesscale", "--policy", "-p", help="Autoscaling policy id (`gesscale simulate "
                                   "--policies help` lists them)."),
        strategy: str = typer.Option("live", "--strategy", help="Reconfiguration: live (executors added/removed "
                                     "while the query runs) or restart (stop at the checkpoint, restart)."),
        testbed: Path | None = typer.Option(None, "--testbed", help="Attach to the testbed running in this folder "
                                            "(started by `gesscale demo --keep` or another run); without it a new "
                                            "testbed is brought up in --run-dir and torn down at the end."),
        run_dir: Path = typer.Option(Path("out/run"), "--run-dir", help="Folder of a new testbed (logs, checkpoint,"
                                     " controller state)."),
        nodes: int = typer.Option(6, "--nodes", **local_range("nodes"),
                                  help="Fog nodes of a new testbed (fog1..fogN)."),
        node_cpu: float = typer.Option(0.5, "--node-cpu", **local_range("node_cpu"),
                                       help="CPU budget of each fog node in cores (cgroup)."),
        bootstrap: str | None = typer.Option(None, "--bootstrap", help="Kafka to read from for a new testbed "
                                             "[default: start the embedded broker on 127.0.0.1:15092]."),
        input_topic: str = typer.Option("rides", "--input", help="Input topic of the job (new testbed)."),
        latency_map: Path | None = typer.Option(None, "--latency-map", exists=True, help="Latency map naming the nodes "
                                                "[default: inventory/latency/fog9.yaml]."),
        state: Path | None = typer.Option(None, "--state", help="Controller state file (model, last change); a "
                                          "restarted controller resumes from it [default: <testbed>/controller.json]."),
        model: Path | None = typer.Option(None, "--model", help="Starting performance model of a model-based policy "
                                          "(the file `gesscale calibrate` writes). A model saved in a resumed "
                                          "controller state (--state) wins over the file."),
        metrics_port: int | None = typer.Option(15090, "--metrics-port", **number_range(0, PORT[1]),
                                                help="Serve Prometheus gesscale_* metrics on 127.0.0.1:PORT/metrics "
                                                "(0: off)."),
        duration: str | None = typer.Option(None, "--duration", help="Stop after this long (e.g. 5m; at most a "
                                            "year) [default: until Ctrl-C]."),
        wan: bool = wan_option(True, "New testbed: "),
        site: str | None = site_option("New testbed: "),
        query: str | None = query_option("New testbed: ", default=None),
        reset_state: bool = typer.Option(False, "--reset-state", help="Start afresh: the existing controller "
                                         "state is moved aside (controller.reset-<time>.json), not deleted."),
        view: bool = typer.Option(True, "--view/--no-view", help="Live terminal view (off: one line per period)."),
        events: Path | None = typer.Option(
            None, "--events", exists=True, dir_okay=False,
            help="New testbed with --wan: events file (docs/events.md) of what happens to the fog during the run, "
                 "t = 0 at the controller's start: its link changes are applied to the WAN emulation at their "
                 "times, its partitions and flaps cut the pairs' links; the controller's map stays --latency-map "
                 "(it sees the events only by measuring: --latency-source measured|both). Its node events act on "
                 "the fog nodes: a crash kills the node's worker and executors (its replica is lost and replaced), "
                 "a leave cordons the node and removes its replica after the drain, a node joins at its join. "
                 "Applied: <run-dir>/wan-events.jsonl, <run-dir>/node-events.jsonl."),
        controller: dict[str, Any] | None = None,
        policy_option_args: list[str] | None = None,
    ) -> None:
        """Run the autoscaling controller live on the real Spark job of the local fog testbed.

        Each period the controller reads the job's micro-batches and the broker's offsets, decides with the
        policy, and adds or removes executors on the chosen fog nodes (live or by restart). Model state is saved
        every period, so a controller killed and started again resumes. Ctrl-C stops and, for a testbed it
        brought up itself, tears everything down.

        --events FILE makes the fog change during the run (link changes, partitions, flaps, applied to the WAN
        emulation; crashes, leaves, joins and churn, applied to the fog nodes; the controller's map stays the
        file's); --latency-source measured|both gives the controller the RTTs it measures every period from
        inside the fog nodes instead of the map (docs/events.md).

        Controller options (--control-period, --warmup, --min-replicas, --max-replicas, ...) and policy options
        (--policy-option KEY=VALUE) are those of `gesscale options`, with this command's defaults.
        """
        from rich.console import Console
        from rich.live import Live

        from gesscale.backend import STRATEGIES
        from gesscale.config import ControllerConfig
        from gesscale.exporter import ControllerMetrics
        from gesscale.latency_map import load_latency_map
        from gesscale.runner import error_reporter
        from gesscale.testbed import DEFAULT_MAP, Testbed, TestbedConfig
        from gesscale.testbed.backend import LocalBackend
        from gesscale.testbed.controller import (
            LiveController,
            fog_events,
            live_monitor,
            node_schedule,
            parse_duration,
            run_network_summary,
        )
        from gesscale.testbed.job import JobSettings
        from gesscale.testbed.live import LiveView
        from gesscale.testbed.wan import WanSettings

        if backend not in BACKENDS:
            raise UserError(f"--backend {backend!r} is not supported by `gesscale run` (only: local); "
                            "use `gesscale k8s run` or `gesscale simulate`")
        if strategy not in STRATEGIES:
            raise UserError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
        from gesscale.model_file import load_model_file
        from gesscale.options import parse_policy_option_args
        from gesscale.placement import starting_nodes
        from gesscale.policies.base import make_policy
        from gesscale.testbed.controller import start_from_model

        controller = dict(controller or {})
        popts = parse_policy_option_args(policy_option_args or [], [policy]).get(policy, {})
        start_model = load_model_file(model) if model is not None else None
        if start_model is not None:  # a bad file or policy fails before anything starts
            start_from_model(make_policy(policy, **popts), start_model)
        else:
            make_policy(policy, **popts)  # an unknown id fails before anything starts
        ControllerConfig(**controller)  # options that contradict each other fail before anything starts
        stop_after = parse_duration(duration, "--duration") if duration else None
        if stop_after is not None and outside(stop_after, RUN_DURATION):
            raise UserError(f"--duration {range_problem(stop_after, RUN_DURATION)} s")
        lmap = load_latency_map(latency_map or DEFAULT_MAP)
        fog_map, note = fog_events(lmap, events, owned=testbed is None, wan=wan, command="run")
        source = controller.get("latency_source", "map")
        if source != "map" and testbed is None and not wan:
            raise UserError(f"--latency-source {source} measures the links through the WAN emulation; run with --wan")
        if note is not None:
            typer.echo(f"gesscale: warning: {note}", err=True)
        if testbed is None:
            query = checked_query(query)
        elif query is not None:
            raise UserError("--query chooses the job of a new testbed; an attached testbed (--testbed) runs the "
                            "query it was started with")
        console = Console(soft_wrap=True)
        from gesscale.state_file import read_state
        from gesscale.state_file import reset_state as set_state_aside

        state_path = state or (testbed if testbed is not None else run_dir) / "controller.json"
        if reset_state:
            kept = set_state_aside(state_path)
            if kept is not None:
                console.print(f"--reset-state: the previous state is kept as {kept}")
        else:
            read_state(state_path)  # a damaged state is reported now, before a testbed is brought up
        sigterm_as_interrupt()
        owned = testbed is None
        if owned:
            names = lmap.names[:nodes]
            if len(names) < nodes:
                raise UserError(f"the latency map has only {len(names)} nodes")
            console.print(f"bringing up the testbed in {run_dir}: {nodes} fog nodes at {node_cpu:g} core each ...")
            # the job starts at --min-replicas, on the first node and its nearest (the run's twin starts there too)
            start = starting_nodes(lmap.subset(names).placement_graph(), names, names[0],
                                   min(ControllerConfig(**controller).min_replicas, len(names)))
            tb = Testbed.up(TestbedConfig(run_dir=run_dir, nodes=names, node_cpu=node_cpu, bootstrap=bootstrap,
                                          initial=list(start),
                                          job=JobSettings(bootstrap=bootstrap or "", input=input_topic,
                                                          query=query or "nearest-landmark"),
                                          wan=WanSettings(fog_map, site) if wan else None))
        else:
            tb = Testbed.attach(testbed)
        metrics = ControllerMetrics()
        try:
            names = tb.fleet.names
            lmap_run = lmap.subset(names)
            config = ControllerConfig(**{**controller, "max_replicas": controller["max_replicas"] or len(names)})
            be = LocalBackend(tb.fleet, tb.job, lmap_run, strategy=strategy, control_period_s=config.control_period_s,
                              wan=tb.wan, events=node_schedule(fog_map, owned=owned, wan=wan))
            live_view = LiveView(f"gesscale run: {policy} on {len(names)} fog nodes ({strategy})")
            listeners = [metrics.on_step, live_view.on_step]
            if not view:
                listeners.append(lambda r, m: console.print(
                    f"t={r.observation.time_s:.0f}s in={r.observation.input_rate:.0f}/s "
                    f"done={r.observation.throughput:.0f}/s backlog={r.observation.backlog:.0f} "
                    f"replicas={','.join(r.observation.replicas)} -> {r.decision.reason}"))
            monitor = None
            if config.latency_source != "map":
                monitor = live_monitor(be, tb.wan, lmap, config.latency_source, config.control_period_s,
                                       record=tb.fleet.run_dir / "network-monitor.jsonl")
                console.print(f"measuring the network every period ({config.latency_source}): "
                              f"{len(monitor.probes)} probes a round from inside the fog nodes, site {monitor.site}; "
                              f"rounds in {tb.fleet.run_dir / 'network-monitor.jsonl'}")
            ctl = LiveController(be, policy, lmap_run, config, state or tb.fleet.run_dir / "controller.json",
                                 listeners, initial_model=start_model, policy_options=popts, monitor=monitor)
            ctl.hooks.on_error = error_reporter(console.print)  # the period is skipped, the run goes on
            summary = ctl.policy.model_summary() or {}
            if ctl.resume_note:
                console.print(ctl.resume_note)
            if ctl.resumed:
                console.print(f"resumed from {ctl.state_path}: {summary.get('measurements', 0)} model measurements")
            if start_model is not None:
                source = f"the resumed state {ctl.state_path} (it wins over --model)" if ctl.model_from == "state" \
                    else str(model)
                console.print(f"starting model from {source}: alpha={summary.get('alpha')}, "
                              f"beta={summary.get('beta')}, gamma={summary.get('gamma')}")
            if metrics_port:
                metrics.serve(metrics_port)
            t_end = time.monotonic() + stop_after if stop_after else None
            until = (lambda: time.monotonic() >= t_end) if t_end else (lambda: False)
            if view:
                with Live(live_view, console=console, refresh_per_second=2):
                    ctl.run(until, catch_interrupt=True)
            else:
                ctl.run(until, catch_interrupt=True)
            be.stop()  # no node event acts on the testbed from here on
            if ctl.interrupted:
                console.print("stopping ...")
            for line in run_network_summary(tb.wan, monitor, tb.fleet.run_dir, tb.fleet.state.t0, ctl.reconfig_path):
                console.print(line)
        finally:
            metrics.close()
            if owned:
                tb.close()
