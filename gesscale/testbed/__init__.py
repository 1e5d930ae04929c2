"""Fog-in-a-box: the Kafka-compatible broker, the budgeted fog nodes (Spark workers) and the streaming job on this
machine, brought up and torn down as one unit.

    with Testbed.up(TestbedConfig(run_dir=Path("out/testbed"), nodes=["fog1", "fog2", "fog3"])) as tb:
        backend = LocalBackend(tb.fleet, tb.job, latency_map)

`Testbed.attach(run_dir)` joins a testbed another process brought up (a controller restarted after a crash);
`close()` from either stops every process and removes every cgroup. See docs/testbed.md.
"""

from __future__ import annotations

import contextlib
import signal
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from gesscale.errors import UserError
from gesscale.testbed.fleet import Fleet, FleetPorts
from gesscale.testbed.job import JobSettings, TestbedJob
from gesscale.testbed.wan import TestbedWan, WanSettings

DEFAULT_MAP = Path(__file__).resolve().parents[2] / "inventory" / "latency" / "fog9.yaml"
# The demo's layout (docs/testbed.md, "A layout where placement matters"): three metro nodes around the site, three
# remote ones, so that where the replicas go changes what they sustain.
DEMO_MAP = DEFAULT_MAP.parent / "rhine6.yaml"
KAFKA_PORT = 15092


@dataclass
class TestbedConfig:
    """What to bring up: where, which nodes, their CPU budget, the broker and the job's knobs."""

    __test__ = False  # not a pytest test class despite the name

    run_dir: Path
    nodes: list[str]
    initial: list[str] = field(default_factory=list)  # nodes hosting an executor at start (default: the first)
    node_cpu: float = 0.25
    bootstrap: str | None = None  # None: start the embedded broker on KAFKA_PORT
    kafka_port: int = KAFKA_PORT
    partitions: int = 6
    job: JobSettings | None = None
    ports: FleetPorts = field(default_factory=FleetPorts)
    wan: WanSettings | None = None  # emulate the latency map between the nodes and the site (gesscale.testbed.wan)


class Testbed:
    """A running broker (optional), fleet and job; a context manager that always tears down."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, fleet: Fleet, job: TestbedJob, broker: object | None = None,
                 wan: TestbedWan | None = None) -> None:
        self.fleet = fleet
        self.job = job
        self.broker = broker
        self.wan = wan

    @classmethod
    def up(cls, cfg: TestbedConfig, start_job: bool = True) -> Testbed:
        """Start everything; on any failure (or Ctrl-C) stop what was started, then re-raise."""
        from gesscale.brokers import start_kafka
        from gesscale.brokers.topics import ensure_topic
        from gesscale.testbed.latency import LOG_APPEND_TIME

        initial = cfg.initial or cfg.nodes[:1]
        unknown = [n for n in initial if n not in cfg.nodes]
        if unknown:
            raise UserError(f"initial node(s) {', '.join(unknown)} are not testbed nodes")
        run_dir = Path(cfg.run_dir).resolve()
        broker = None
        fleet = None
        job = None
        wan = None
        try:
            bootstrap = cfg.bootstrap
            if bootstrap is None:
                broker = start_kafka(cfg.kafka_port, run_dir / "kafka")
                bootstrap = broker.bootstrap
            settings = cfg.job or JobSettings(bootstrap=bootstrap)
            settings.bootstrap = bootstrap
            # Broker append times on every topic of the job: what a record's latency is measured by
            # (gesscale/testbed/latency.py); a topic that already exists keeps its own timestamp type. The output
            # and dead-letter topics get the input's partition count, as the job would give them.
            parts = ensure_topic(bootstrap, settings.input, cfg.partitions, LOG_APPEND_TIME)
            for topic in (settings.output, settings.dead_letter):
                ensure_topic(bootstrap, topic, parts, LOG_APPEND_TIME)
            fleet = Fleet.create(run_dir, cfg.nodes, cfg.node_cpu, cfg.ports)
            if broker is not None:
                fleet.state.extra["broker"] = {"pid": broker.process.pid, "argv": broker.process.argv,
                                               "log": str(broker.process.log_path)}
            if cfg.wan is not None:
                wan = TestbedWan.start(cfg.wan, {n: fleet.host_of(n) for n in fleet.names}, fleet.state.owner_pid,
                                       run_dir)
                fleet.state.extra["net_groups"] = str(wan.groups.parent)
                fleet.state.extra["wan"] = wan.describe()
                fleet.save()
            for node in initial:
                fleet.start_worker(node)
            job = TestbedJob(run_dir, fleet.state.master_url, settings)
            tb = cls(fleet, job, broker, wan)
            if start_job:
                job.start(len(initial))
                tb.save()
                job.wait_ready(len(initial))
            tb.save()
            return tb
        except BaseException:
            if job is not None:
                job.stop()
            if fleet is not None:
                fleet.close()
            if broker is not None:
                broker.stop()
            if wan is not None:
                wan.stop()
            raise

    @classmethod
    def attach(cls, run_dir: Path) -> Testbed:
        """Join a running testbed (see `Fleet.attach`)."""
        from gesscale.process import ManagedProcess

        fleet = Fleet.attach(run_dir)
        raw = fleet.state.extra.get("job")
        if not raw:
            raise UserError(f"the testbed at {run_dir} has no job settings")
        job = TestbedJob(fleet.run_dir, fleet.state.master_url, JobSettings(**raw))
        b = fleet.state.extra.get("broker")
        broker = ManagedProcess(int(b["pid"]), list(b["argv"]), Path(b["log"])) if b else None
        w = fleet.state.extra.get("wan")
        return cls(fleet, job, broker, TestbedWan.from_state(w, fleet.run_dir) if w else None)

    def save(self) -> None:
        """Record the job's settings (and PID) in the fleet's state file."""
        self.fleet.state.extra["job"] = self.job.settings.to_dict()
        self.fleet.save()

    def close(self) -> None:
        """Stop the job, the workers, the master and the broker; remove the cgroups. Signals wait until done."""
        old = {}
        with contextlib.suppress(ValueError):  # not the main thread: no handlers to defer
            old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.fleet.reload()
            raw = self.fleet.state.extra.get("job")
            if raw and raw.get("pid") and raw.get("pid") != self.job.settings.pid:
                self.job.settings.pid = raw["pid"]
            self.job.stop(timeout_s=30)
            self.fleet.close()
            if self.broker is not None:
                self.broker.stop()
            if self.wan is not None:
                self.wan.stop()
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
