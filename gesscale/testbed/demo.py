"""The live fog-in-a-box demo: broker, budgeted fog nodes, producer with a compressed taxi day, the Spark job and
the live controller; then the exactly-once accounting, the reconfigurations, the model against its
measurements, a timeline PNG, the simulator on the run's simulated twin (`gesscale.twin`: built from what the run
measured) and the twin against the run (`gesscale.fidelity`).

`run_demo(DemoOptions(...))` returns the report dict (also written as JSON); the CLI prints it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gesscale.errors import UserError, brief
from gesscale.options import controller_option
from gesscale.workloads import TAXI_HOURLY_SHARE, taxi_mean_rate

DUPLICATION = 3  # each ride is sent three times (distinct keys), as in Gesscale's experiments
SIM_POLICIES = "gesscale,thr-nlunaware,thr-nlaware,mdl-nlunaware,ideal"
WARMUP_RECORDS = 500
STRATEGIES = ("live", "restart")
# The declared range (lo, hi, whole number) of every number of the demo, checked for its flags and for an
# experiment file's `local:` (gesscale/experiment/spec.py) alike; `control_period_s` and `warmup_s` are
# controller options, declared in gesscale/config.py.
LOCAL_RANGES: dict[str, tuple[float, float, bool]] = {
    "nodes": (1, 9, True),
    "node_cpu": (0.01, 1, False),  # cores; a cgroup quota below 1 % of a core is not schedulable
    "day_s": (30, 86400, False),  # at most a real day: the replay is never slower than the trace
    "rides_per_day": (100, 10**9, True),
    "peak_load": (1, 9, False),
    "probe_s": (5, 3600, False),
    "start_hour": (0, 23, True),
    "hours": (1, 24, False),  # of the day, from start_hour
    "drain_timeout_s": (0, 86400, False),
    "port_shift": (0, 800, True),  # the testbed's ports stay in 15000-15999
}
FLAGS = {"nodes": "--nodes", "node_cpu": "--node-cpu", "day_s": "--day", "rides_per_day": "--rides-per-day",
         "peak_load": "--peak-load", "probe_s": "--probe", "start_hour": "--start-hour",
         "hours": "--hours", "drain_timeout_s": "--drain-timeout", "port_shift": "port_shift"}
RANGE_NOTES = {"nodes": " (fog1..fog9 on 127.0.0.31-39)", "node_cpu": " cores", "day_s": " s",
               "peak_load": " (times what one node sustains)", "probe_s": " s", "hours": " h", "drain_timeout_s": " s"}


@dataclass
class DemoOptions:
    """Every knob of the live demo (the CLI maps its flags onto these)."""

    out: Path = Path("out/demo")
    report: Path | None = None  # default: <out>/report.json
    nodes: int = 6
    node_cpu: float = 0.25
    policy: str = "gesscale"
    strategy: str = "live"
    # One taxi day compressed into this many seconds. A live scale-up inside a quarter-core node takes 40-90 s
    # to take effect here (the new executor's JVM and Python workers start inside its budget; docs/testbed.md),
    # so two of them, one after the other, need the day's busy part (hours 7-24) to last longer than that twice.
    day_s: float = 150.0
    # The day's volume: None sizes it from what one node sustains on this machine, measured during the warm-up
    # (`node_rate`), so that the evening peak is `peak_load` times that; a number fixes it instead. MST(2) was
    # 1.15-1.9 x MST(1) in the runs of docs/testbed.md, so a peak of 2 x MST(1) needs three nodes.
    rides_per_day: int | None = None
    peak_load: float = 2.0
    probe_s: float = 15.0  # the warm-up keeps one node saturated at least this long, until its batches are steady
    # Start at the end of the night trough: the morning rise comes within seconds (the first scale-up early),
    # the evening peak follows, and the night after it ends the day (scale-down).
    start_hour: int = 6
    # Hours of the day replayed from start_hour (24: the whole day); fewer for a run about one stretch of it, such
    # as an event in the near-flat hours 8-16, without waiting for the rest of the day.
    hours: float = 24.0
    control_period_s: float = controller_option("control_period_s").default_for("demo")  # gesscale options
    warmup_s: float = controller_option("warmup_s").default_for("demo")
    drain_timeout_s: float = 120.0
    max_rows_per_batch: int = 2000
    partitions: int = 6
    sim_policies: str = SIM_POLICIES
    latency_map: Path | None = None  # None: gesscale.testbed.DEMO_MAP (docs/testbed.md)
    # Emulate the map's RTTs between the fog nodes and the site of broker and driver (gesscale.testbed.wan);
    # site None: the map's node with the smallest worst RTT to the demo's nodes.
    wan: bool = True
    site: str | None = None
    port_shift: int = 0  # added to every default port of the testbed (run two demos side by side)
    # What happens to the fog during the day (docs/events.md), t = 0 at the day's start: link changes, partitions
    # and flaps applied to the WAN emulation; the controller's map stays `latency_map`.
    events: Path | None = None
    query: str = "nearest-landmark"  # the job's `--query` (docs/queries.md)
    listeners: list[Callable[..., None]] = field(default_factory=list)
    controller: dict[str, Any] = field(default_factory=dict)  # the other controller options (`gesscale options`)
    policy_options: dict[str, Any] = field(default_factory=dict)  # options of `policy` (`--policy-option`)

    @property
    def speed(self) -> float:
        """Trace seconds per wall second."""
        return 86400.0 / self.day_s

    def workload(self) -> dict[str, Any]:
        """The taxi workload spec shared by the producer (`--pattern`)."""
        if self.rides_per_day is None:
            raise ValueError("the day's volume is sized after the warm-up (size_day)")
        return {"kind": "taxi", "speed": round(self.speed, 6), "days": round(self.hours / 24.0, 6),
                "rides_per_day": self.rides_per_day,
                "start_hour": self.start_hour, "duplication": DUPLICATION}

    @property
    def replay_s(self) -> float:
        """Wall seconds of input: the day's length times the share of it replayed (`hours`)."""
        return self.day_s * self.hours / 24.0

    def peak_rate(self) -> float:
        """Records/s of the day's busiest hour (the taxi shape's mean; arrivals are Poisson around it)."""
        return max(taxi_mean_rate(h, self.workload()) for h in range(24))

    def size_day(self, node_rate: float) -> int:
        """Rides per day whose peak is `peak_load` x `node_rate` records/s (what one node sustains)."""
        per_ride = max(TAXI_HOURLY_SHARE) / 3600.0 * self.speed * DUPLICATION  # records/s at the peak per ride
        return max(100, int(round(self.peak_load * node_rate / per_ride)))

    def pattern(self) -> str:
        """`gesscale produce --pattern` text of the workload."""
        return "taxi," + ",".join(f"{k}={v}" for k, v in self.workload().items() if k != "kind")

    def validate(self) -> None:
        """UserError for values the demo cannot run with: every number within its declared range
        (`LOCAL_RANGES`), the strategy one of `STRATEGIES`."""
        for key, (lo, hi, integer) in LOCAL_RANGES.items():
            value = getattr(self, key)
            if value is None:  # rides_per_day: sized after the warm-up
                continue
            bad = (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
                   or not lo <= value <= hi or (integer and value != int(value)))
            if bad:
                what = "a whole number" if integer else "a number"
                raise UserError(f"{FLAGS[key]} must be {what} between {lo:g} and {hi:g}{RANGE_NOTES.get(key, '')}, "
                                f"got {brief(value)}")
        if self.strategy not in STRATEGIES:
            raise UserError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {brief(self.strategy)}")
        source = self.controller.get("latency_source", "map")
        if source != "map" and not self.wan:
            raise UserError(f"--latency-source {source} measures the links through the WAN emulation; run with --wan")


class Producer:
    """`gesscale produce` as a child process (own session) replaying the compressed taxi day."""

    def __init__(self, opts: DemoOptions, bootstrap: str, topic: str) -> None:
        self.summary_path = opts.out / "produce.json"
        self.summary_path.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "gesscale", "produce", "--pattern", opts.pattern(), "--kafka", bootstrap,
                "--topic", topic, "--partitions", str(opts.partitions), "--json", str(self.summary_path), "--quiet"]
        self.log = (opts.out / "produce.log").open("ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def done(self) -> bool:
        """True once the replay ended."""
        return self.proc.poll() is not None

    def stop(self) -> None:
        """Interrupt the replay (it delivers what it sent), then wait."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()

    def summary(self) -> dict[str, Any]:
        """The producer's own figures (sent, acked, achieved rate)."""
        try:
            return json.loads(self.summary_path.read_text())
        except (OSError, ValueError):
            return {}


def run_demo(opts: DemoOptions, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the whole demo and return the report (written to `opts.report`)."""
    from gesscale.config import ControllerConfig
    from gesscale.latency_map import event_entries, load_latency_map, read_events
    from gesscale.observation import Placement
    from gesscale.placement import starting_nodes
    from gesscale.report import write_json
    from gesscale.run_end import DrainedEnd
    from gesscale.runner import read_reconfigurations
    from gesscale.testbed import DEMO_MAP, KAFKA_PORT, Testbed, TestbedConfig
    from gesscale.testbed.backend import LocalBackend
    from gesscale.testbed.controller import LiveController, fog_events, live_monitor, node_schedule
    from gesscale.testbed.fleet import FleetPorts
    from gesscale.testbed.job import JobSettings
    from gesscale.testbed.keys import account_job
    from gesscale.testbed.node_events import replacement_times
    from gesscale.testbed.report import model_points
    from gesscale.testbed.wan import WanSettings

    opts.validate()
    # the map and the events are checked before anything is made (a mistake is one line, nothing to tear down)
    lmap_all = load_latency_map(opts.latency_map or DEMO_MAP)
    fog_map, note = fog_events(lmap_all, opts.events, owned=True, wan=opts.wan, command="demo")
    if note is not None:
        print(f"gesscale: warning: {note}", file=sys.stderr)
    # the events file's entries (link changes too), every time in seconds: the report's record, the twin's events
    entries = event_entries(read_events(opts.events), lmap_all, str(opts.events)) if opts.events else []
    t_start = time.monotonic()
    out = opts.out.resolve()
    opts.out = out
    run_dir = out / "testbed"
    if run_dir.exists():
        import shutil

        if (run_dir / "testbed.json").exists():
            raise UserError(f"a testbed seems to run in {run_dir} (testbed.json present); stop it or use --out")
        shutil.rmtree(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    if len(lmap_all.names) < opts.nodes:
        raise UserError(f"the latency map has only {len(lmap_all.names)} nodes")
    names = lmap_all.names[: opts.nodes]
    lmap = lmap_all.subset(names)
    say(f"bringing up the testbed: broker, Spark master, {opts.nodes} fog nodes at {opts.node_cpu:g} core, the job")
    shift = opts.port_shift
    settings = JobSettings(bootstrap="", max_rows_per_batch=opts.max_rows_per_batch,
                           bp_window_s=opts.control_period_s, http_port=15080 + shift, ui_port=15040 + shift,
                           query=opts.query)
    ports = FleetPorts(15077 + shift, 15078 + shift, 15100 + shift, 15200 + shift)
    wan = WanSettings(fog_map, opts.site) if opts.wan else None
    if wan is not None:
        site = wan.resolve_site(names)
        say(f"emulating the map's RTTs between the fog nodes and the site {site} (broker, driver, producer)")
    tb = Testbed.up(TestbedConfig(run_dir=run_dir, nodes=names, node_cpu=opts.node_cpu, job=settings,
                                  partitions=opts.partitions, kafka_port=KAFKA_PORT + shift, ports=ports, wan=wan),
                    start_job=False)
    producer: Producer | None = None
    timings: dict[str, float] = {}
    network: dict[str, Any] = {"emulated": False}
    pings = ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-network")
    checked: Future[dict[str, Any]] | None = None
    events_t0_s = 0.0  # the events' t = 0 (the day's start) on the controller's clock (the periods' time_s)
    try:
        if tb.wan is not None:
            # Pinging every link takes seconds of wall time and almost no CPU: it runs while the job cold-starts.
            checked = pings.submit(measure_network, tb, out, say)
        # The warm-up records wait in the topic before the job starts, so its first micro-batch (the executor's
        # cold start) begins as soon as the query does.
        warm_up(tb.job.settings.bootstrap, tb.job.settings.input, WARMUP_RECORDS)
        tb.job.start(1)
        tb.save()
        tb.job.wait_ready(1)
        timings["setup_s"] = time.monotonic() - t_start
        config = ControllerConfig(**{"model_form": controller_option("model_form").default_for("demo"),
                                     **opts.controller, "control_period_s": opts.control_period_s,
                                     "warmup_s": opts.warmup_s,
                                     "max_replicas": opts.controller.get("max_replicas") or opts.nodes})
        say(f"testbed up in {timings['setup_s']:.0f} s; the job's first micro-batch ({WARMUP_RECORDS} warm-up "
            "records) starts the executor's JVM code and Python workers inside its budget ...")
        t_warm = time.monotonic()
        _wait_first_batch(tb.job, timeout_s=300.0)
        timings["warm_up_s"] = time.monotonic() - t_warm
        if checked is not None:
            network = checked.result()
        load = {"rides_per_day": opts.rides_per_day, "chosen": "given (--rides-per-day)"}
        if opts.rides_per_day is None:
            t_probe = time.monotonic()
            say(f"job started after {timings['warm_up_s']:.0f} s; measuring what {names[0]} sustains: saturated "
                f"for at least {opts.probe_s:.0f} s until its batches are steady ...")
            rate = measure_node_rate(LocalBackend(tb.fleet, tb.job, lmap, wan=tb.wan, schedule=False), names[0],
                                     opts.probe_s, say)
            timings["probe_s"] = time.monotonic() - t_probe
            opts.rides_per_day = opts.size_day(rate)
            load = {"rides_per_day": opts.rides_per_day, "node_rate": round(rate, 1), "peak_load": opts.peak_load,
                    "chosen": f"peak = {opts.peak_load:g} x the {rate:.0f} records/s one node sustained in the "
                              "warm-up (saturated throughput of a drained burst)"}
        start_nodes = starting_nodes(lmap.placement_graph(), lmap.names, names[0], min(config.min_replicas, opts.nodes))
        if len(start_nodes) > 1:  # the day starts at min_replicas, as the run's twin and the controller assume
            t_start_nodes = time.monotonic()
            say(f"starting the day at --min-replicas {len(start_nodes)}: adding "
                f"{', '.join(start_nodes[1:])} beside {names[0]} ...")
            LocalBackend(tb.fleet, tb.job, lmap, wan=tb.wan, schedule=False).apply(
                Placement(start_nodes, lmap.nd_max(start_nodes)))
            timings["start_replicas_s"] = time.monotonic() - t_start_nodes
        load["peak_rate"] = round(opts.peak_rate(), 1)
        part = "" if opts.hours >= 24 else f"hours {opts.start_hour}-{opts.start_hour + opts.hours:g} of "
        say(f"replaying {part}one taxi day in {opts.day_s:.0f} s ({opts.rides_per_day} rides x{DUPLICATION}, peak "
            f"{opts.peak_rate():.0f}/s); controller {opts.policy} ({opts.strategy}), "
            f"period {opts.control_period_s:g} s")
        # The day starts once the job is warm, so that the controller starts without a backlog (runs that started
        # the day with the job began with 30-60 k records waiting; docs/testbed.md, "Limits found on this machine").
        day_start_ms = int(time.time() * 1000)  # records appended from here on are the day's (latency)
        producer = Producer(opts, tb.job.settings.bootstrap, tb.job.settings.input)
        t_run = time.monotonic()
        backend = LocalBackend(tb.fleet, tb.job, lmap, strategy=opts.strategy,
                               control_period_s=opts.control_period_s, wan=tb.wan,
                               events=node_schedule(fog_map, owned=True, wan=opts.wan))
        events_t0_s = backend.started_s - tb.fleet.state.t0
        monitor = None
        if config.latency_source != "map":  # the controller sees what it measures (docs/events.md)
            monitor = live_monitor(backend, tb.wan, lmap_all, config.latency_source, config.control_period_s,
                                   record=out / "network-monitor.jsonl")
        ctl = LiveController(backend, opts.policy, lmap, config, run_dir / "controller.json", opts.listeners,
                             policy_options=opts.policy_options, monitor=monitor)
        deadline = t_run + opts.replay_s + opts.drain_timeout_s
        # The day is over once the input stopped and the backlog drained; the controller then gets a few more
        # periods to scale the idle replicas in (gesscale.run_end: the run's twin ends the same way).
        end = DrainedEnd()

        def over() -> bool:
            if time.monotonic() >= deadline:
                return True
            return end.over(ctl.loop.history[-1] if ctl.loop.history else None, producer.done(),
                            lambda t: ctl.loop.context(t).in_warmup)

        steps = ctl.run(over)
        backend.stop()  # the day is over: no node event acts on the testbed being stopped
        timings["stream_s"] = time.monotonic() - t_run
        producer.stop()
        produced_summary = producer.summary()
        t_stop = time.monotonic()
        tb.job.stop()
        timings["stop_job_s"] = time.monotonic() - t_stop
        t_count = time.monotonic()
        acc = account_job(tb.job)  # on the basis the query calls for (gesscale/testbed/keys.py)
        timings["count_s"] = time.monotonic() - t_count
        t_latency = time.monotonic()
        latency, period_latency, arrivals = measure_latency(tb, steps, day_start_ms, out / "latency.csv.gz")
        timings["latency_s"] = time.monotonic() - t_latency
        reconfigs = read_reconfigurations(ctl.reconfig_path)
        model = model_points(ctl.policy)
        backlog_left = steps[-1].observation.backlog if steps else None
        if tb.wan is not None:
            network["gaps"] = list(tb.wan.gaps)  # daemon restarts during the run (none expected)
            network["changes_applied"] = list(tb.wan.changes_applied)  # link changes: due t_s, SIGHUP time
            network["outages_applied"] = list(tb.wan.outages_applied)  # partitions and flaps: t0, SIGHUP time
            network["t0_unix"] = tb.wan.t0_unix  # the day's t = 0 (the events' clock)
            # the controller's clock (periods' time_s) counts from this: unix = testbed_t0_unix + time_s
            network["testbed_t0_unix"] = tb.fleet.state.t0
            if opts.events is not None:
                network["events"] = {"file": str(opts.events), "entries": entries}
            if backend.node_events is not None:  # crashes, leaves, joins: when applied, what was lost, replaced
                network["node_events_applied"] = list(backend.node_events.applied)
                network["replacements"] = replacement_times(backend.node_events.applied, reconfigs,
                                                             tb.fleet.state.t0)
            cpu = tb.wan.daemon_cpu_s()
            if cpu is not None and not tb.wan.gaps:  # since the testbed came up (a restart would reset it)
                network["daemon_cpu_s"] = round(cpu, 2)
                network["daemon_cpu_pct_of_a_core"] = round(100 * cpu / (time.monotonic() - t_start), 2)
        if monitor is not None:  # the measured latency map: rounds, their cost, the changes it logged
            network["monitor"] = monitor.summary()
    finally:
        pings.shutdown(wait=True)  # the testbed's groups must outlive any ping still running
        if producer is not None:
            producer.stop()
        say("tearing the testbed down")
        tb.close()
    report = _finish(opts, acc, reconfigs, model, steps, lmap, produced_summary, backlog_left, timings, t_start,
                     latency, period_latency, seed=config.seed, arrivals=arrivals,
                     twin_network={"events": entries, "events_t0_s": events_t0_s,
                                   "latency_source": config.latency_source, "model_latency": config.model_latency,
                                   "site": tb.wan.site if tb.wan is not None else None,
                                   "min_replicas": min(config.min_replicas, opts.nodes),
                                   "max_replicas": min(config.max_replicas, opts.nodes)})
    report["load"] = load
    report["network"] = network
    write_json(opts.report or out / "report.json", report)
    return report


def warm_up(bootstrap: str, topic: str, count: int) -> None:
    """Send `count` ride records keyed `warmup<i>-0` (never a key of the day's rides, which are `s<seq>-<dup>`).

    They are real records, processed and counted like the others; they only make the job run its first
    micro-batch (which starts the executor's Python workers, slow inside a small CPU budget) before the day
    starts, so that the day is not over before the controller sees it.
    """
    from dataclasses import replace

    from kafka import KafkaProducer

    from producer.records import RideEncoder
    from producer.source import synthetic_source

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for i, ride in zip(range(count), synthetic_source(None, 500_000, seed=99), strict=False):
            enc = RideEncoder(replace(ride, ride_id=f"warmup{i}"))
            producer.send(topic, key=enc.key_bytes, value=enc.value(0))
        producer.flush(30)
    finally:
        producer.close(5)


def measure_latency(tb: Any, steps: list[Any], day_start_ms: int, path: Path
                    ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """Every day record's end-to-end latency from the broker's append times (`gesscale.testbed.latency`; the job
    stopped, the broker still up): the run's figures, one summary per control period, the records in `path`, and
    the day records' arrivals per second on the testbed's clock (`from_s`, `counts`: the twin's input)."""
    from gesscale.testbed.job import read_batches
    from gesscale.testbed.keys import batch_ranges
    from gesscale.testbed.latency import arrivals_per_second, record_latencies, report
    from jobs.query import load_query

    s = tb.job.settings
    observations = read_batches(tb.job.batches_path)[0]
    rec = record_latencies(s.bootstrap, s.input, s.output, s.dead_letter,
                           per_record=load_query(s.query).per_record, observations=observations,
                           ranges=batch_ranges(tb.job.checkpoint, observations), since_ms=day_start_ms,
                           node_at=tb.fleet.node_at)
    ends = [tb.fleet.state.t0 + st.observation.time_s for st in steps]
    run, periods = report(rec, ends)
    run["records_csv"] = str(rec.write_csv(path))
    run["day_start_unix_ms"] = day_start_ms
    return run, periods, arrivals_per_second(rec.appended_ms, tb.fleet.state.t0)


def measure_network(tb: Any, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Ping every emulated link from inside its source's group: configured against measured, JSON and PNG."""
    from gesscale.report import write_json
    from gesscale.testbed.wan_measure import measure_links
    from netem.validate import plot_validation

    hosts = {n: tb.fleet.host_of(n) for n in tb.fleet.names}
    check = measure_links(tb.wan.latency_map, tb.wan.describe()["links"], hosts, tb.wan.groups.parent, tb.wan.site)
    bad = [p for p in check.pairs if not p.ok]
    png = out / "network.png"
    plot_validation(check, png)
    doc = {"emulated": True, "engine": "userspace", "site": tb.wan.site, **check.to_dict(),
           "links_ok": len(check.pairs) - len(bad), "png": str(png)}
    write_json(out / "network.json", doc)
    say(f"network: {len(check.pairs) - len(bad)} of {len(check.pairs)} links within tolerance (site {tb.wan.site})"
        + (f"; outside: {', '.join(f'{p.src}->{p.dst} {p.median_ms} ms for {p.rtt_ms:g}' for p in bad)}"
           if bad else ""))
    return doc


def measure_node_rate(backend: Any, node: str, seconds: float, say: Callable[[str], None]) -> float:
    """Records/s the job sustains on `node` alone, warm: what the day's volume is sized from.

    The capacity probe's warm-up keeps the node saturated (full micro-batches, more records always waiting) for
    at least `seconds` and until its micro-batches stop getting faster (a fresh executor speeds up over its
    first minute); the saturated throughput of its last steady batches is the rate (`steady_rate`). Only when
    too few of them were held back is a drained burst of full micro-batches measured instead
    (`LocalProbeTarget.upper_bound`, without its headroom), which costs another ~20 s. The probe's records are
    real records with unique keys, counted like every other.
    """
    from gesscale.testbed.probe_target import LocalProbeTarget

    target = LocalProbeTarget(backend)  # quiet: its messages speak of a search that is not run here
    try:
        since = time.time()
        sent = target.warm_up(seconds)
        rate = target.steady_rate(since)
        if rate is None:
            target.upper_bound((node,))
            rate = target.saturated[(node,)]
    finally:
        target.close()
    say(f"    {node} sustains about {rate:.0f} records/s ({sent} warm-up records)")
    return rate


def _wait_first_batch(job: Any, timeout_s: float) -> None:
    """The job's first micro-batch starts its executor's Python workers (slow inside a small CPU budget); the
    controller starts observing once that is done, as it would on a cluster whose job has been running."""
    from gesscale.testbed.job import read_batches

    deadline = time.monotonic() + timeout_s
    while not read_batches(job.batches_path)[0]:
        if time.monotonic() > deadline:
            raise UserError(f"the job completed no micro-batch within {timeout_s:.0f} s; see {job.log_path}")
        if not job.alive():
            raise UserError(f"the job exited; see {job.log_path}: {job.log_tail()}")
        time.sleep(0.5)


def _finish(opts: DemoOptions, acc: Any, reconfigs: list[dict[str, Any]], model: dict[str, Any] | None,
            steps: list[Any], lmap: Any, produced_summary: dict[str, Any], backlog_left: float | None,
            timings: dict[str, float], t_start: float, latency: dict[str, Any] | None = None,
            period_latency: list[dict[str, Any]] | None = None, seed: int = 1,
            arrivals: dict[str, Any] | None = None, twin_network: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plot, build the run's simulated twin, simulate, and assemble the report (each scale-up with the median
    ND_max a random choice would have had: `gesscale.testbed.report.reconfiguration_rows`; the twin against the
    run: `gesscale.fidelity`, its decisions against the run's: `gesscale.twin_decisions`). `twin_network`: the
    run's events, their t = 0 on the controller's clock, its latency source and replica bounds (`build_twin`'s
    keywords; without it, the bounds [1, `opts.nodes`])."""
    from gesscale.fidelity import fidelity_rows, observed, predicted, scale_changes
    from gesscale.policies.base import parse_policy_list, policy_ids
    from gesscale.report import simulated_latency, summary
    from gesscale.scenario import scenario_from_dict
    from gesscale.simulate import simulate_many
    from gesscale.testbed.report import plot_timeline, reconfiguration_rows
    from gesscale.twin import TWIN_NAME, build_twin
    from gesscale.twin_decisions import compare_seeds

    title = f"{opts.policy} ({opts.strategy}) on {opts.nodes} fog nodes, one taxi day in {opts.day_s:.0f} s"
    period_latency = period_latency or []
    png = plot_timeline(steps, reconfigs, model, opts.out / "timeline.png", title, lmap, period_latency, latency)
    periods = [s.observation.to_dict() for s in steps]
    twin_kw = dict(twin_network or {})
    scen, measured = build_twin(periods, reconfigs, model, lmap.to_dict(), twin_kw.pop("max_replicas", opts.nodes),
                                opts.warmup_s, opts.control_period_s, arrivals, **twin_kw)
    policies = parse_policy_list(opts.sim_policies)
    if opts.policy in policy_ids():  # the live policy on its twin: the prediction of this run
        policies = list(dict.fromkeys([opts.policy, *policies]))
    t_sim = time.monotonic()
    results = simulate_many(scenario_from_dict(scen, TWIN_NAME), policies, 1, keep_history_first=True)
    timings["simulate_s"] = time.monotonic() - t_sim
    sim_latency = simulated_latency(results)["by_policy"]
    medians = summary(results)
    fidelity = decisions = None
    if opts.policy in medians:
        fidelity = fidelity_rows(observed(periods, scale_changes(reconfigs), latency),
                                 predicted(medians[opts.policy], sim_latency.get(opts.policy),
                                           results[opts.policy]))
        decisions = compare_seeds(reconfigs, {r.seed: r.history for r in results[opts.policy]},
                                  measured["zero_s"], opts.control_period_s, opts.policy)
    timings["total_s"] = time.monotonic() - t_start
    return {
        **acc.to_dict(),
        "backlog_at_stop": backlog_left,
        "reconfigurations": reconfiguration_rows(reconfigs, lmap, seed, opts.strategy),
        "model": model,
        "producer": produced_summary,
        "latency": latency,
        "periods": [s.observation.to_dict() | {"decision": s.decision.reason}
                    | ({"latency": period_latency[i]} if i < len(period_latency) else {})
                    | ({"network": [c.to_dict() for c in s.network_changes]} if s.network_changes else {})
                    for i, s in enumerate(steps)],
        "timeline_png": str(png),
        "calibrated_scenario": scen,  # the run's simulated twin (gesscale.twin), under its historical name
        "twin": measured,  # what the twin was built from
        "arrivals": arrivals,  # the day records per second of their append to the input topic
        "simulation": medians,
        "simulated_latency": sim_latency,  # the twin's, same keys as `latency`
        "fidelity": fidelity,  # the live policy on its twin against the run (gesscale.fidelity)
        "twin_decisions": decisions,  # its decisions against the run's (gesscale.twin_decisions)
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in opts.__dict__.items() if k != "listeners"},
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
    }
