"""`gesscale produce` as a function: options → ride source → schedule → sink → replay → summary figures."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gesscale.brokers.security import mqtt_security
from gesscale.errors import UserError
from producer.mqtt_sink import KafkaConfirm, MqttEndpoint, MqttSink
from producer.outbox import Outbox
from producer.records import RideEncoder
from producer.replay import ReplayStats, replay
from producer.resume import ResumeCount, held_ids, skip_held
from producer.schedule import Scheduled, by_event_time, by_rate_profile, profile_times
from producer.sinks import KafkaSink, Notify, Sink
from producer.source import RideSource, file_source, synthetic_source


@dataclass
class ProduceOptions:
    """Everything `gesscale produce` can be told (see its --help for each)."""

    file: Path | None = None
    fmt: str = "auto"
    speed: float = 10.0
    duplication: int = 3
    pattern: str | None = None
    rate: float | None = None
    duration_s: float | None = None
    seed: int = 1
    days: float = 2.0
    rides_per_day: int = 500_000
    limit: int | None = None
    kafka: str = "127.0.0.1:9092"
    topic: str = "rides"
    partitions: int = 8
    mqtt: str | None = None
    mqtt_topic: str = "rides"
    qos: int = 1
    give_up_after_s: float = 120.0
    resume: bool = False
    client_id: str | None = None
    outbox: Path | None = None
    confirm: bool = True
    keepalive_s: int = 30


@dataclass
class ProduceResult:
    """What a produce run did: replay figures, the source's read/skip counts, where records went."""

    stats: ReplayStats
    source: RideSource
    destination: str
    pacing: str
    resumed: ResumeCount | None = None


def _check(opts: ProduceOptions) -> None:
    if opts.speed <= 0:
        raise UserError("--speed must be > 0")
    if opts.duplication < 1:
        raise UserError("--duplication must be >= 1")
    if opts.pattern and opts.rate:
        raise UserError("give either --pattern or --rate, not both")
    if opts.rate is not None and not opts.duration_s:
        raise UserError("--rate needs --duration")
    if opts.qos not in (0, 1):
        raise UserError("--qos must be 0 or 1")
    if opts.give_up_after_s <= 0:
        raise UserError("--give-up-after must be > 0 seconds")
    if opts.resume and opts.mqtt and not opts.confirm:
        raise UserError("--resume reads the Kafka topic back: with --mqtt it needs confirmation (no --no-confirm)")
    if opts.mqtt and opts.confirm and opts.qos != 1:
        raise UserError("end-to-end confirmation needs --qos 1 (or give --no-confirm)")
    if not 5 <= opts.keepalive_s <= 3600:
        raise UserError(f"--keepalive must be 5..3600 seconds, got {opts.keepalive_s}")


def run_client_id(opts: ProduceOptions) -> str:
    """The MQTT client id of a run: `--client-id`, else derived from what defines the run (broker, topic, source
    and pacing), so that the same command, restarted or `--resume`d, resumes the same session and outbox."""
    if opts.client_id:
        return opts.client_id
    what = {"mqtt": opts.mqtt, "mqtt_topic": opts.mqtt_topic, "file": str(opts.file.resolve()) if opts.file else None,
            "format": opts.fmt, "speed": opts.speed, "duplication": opts.duplication, "pattern": opts.pattern,
            "rate": opts.rate, "duration": opts.duration_s, "seed": opts.seed, "days": opts.days,
            "rides_per_day": opts.rides_per_day, "limit": opts.limit, "kafka": opts.kafka, "topic": opts.topic}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]
    return f"gesscale-producer-{digest}"


def outbox_path(opts: ProduceOptions, client_id: str) -> Path:
    """Where the run's durable MQTT outbox lives: `--outbox`, else out/mqtt-outbox/<client id>.sqlite."""
    return opts.outbox if opts.outbox is not None else Path("out") / "mqtt-outbox" / f"{client_id}.sqlite"


def build_source(opts: ProduceOptions) -> RideSource:
    """The file's rides, or the synthetic trace (endless when a rate pattern sets the pace)."""
    if opts.file is not None:
        return file_source(opts.file, opts.fmt)
    paced_by_pattern = bool(opts.pattern or opts.rate)
    return synthetic_source(None if paced_by_pattern else opts.days, opts.rides_per_day, opts.seed)


def build_schedule(
    opts: ProduceOptions, source: RideSource
) -> tuple[Iterable[Scheduled[RideEncoder]], str, int | None]:
    """The record schedule (of the source's rides, encoded), a one-line description of the pacing, and the
    planned record count when known."""
    from gesscale.workloads import rate_profile
    from producer.pattern import constant_rate, parse_pattern

    if opts.pattern or opts.rate:
        spec = constant_rate(opts.rate, int(opts.duration_s or 0)) if opts.rate else parse_pattern(opts.pattern or "")
        duration = int(opts.duration_s) if opts.duration_s else None
        profile = rate_profile(spec, duration_s=duration, seed=opts.seed)
        desc = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "kind")
        pacing = (
            f"pattern {spec['kind']} ({desc}), {len(profile)} s, {int(profile.sum())} records planned, "
            f"x{opts.duplication} per ride"
        )
        planned = sum(1 for _ in profile_times(profile)) if profile.sum() < 50_000_000 else None
        return by_rate_profile(source.encoded(), profile, opts.duplication), pacing, planned
    schedule: Iterable[Scheduled[RideEncoder]] = by_event_time(source.encoded(), opts.speed, opts.duplication)
    pacing = f"event time x{opts.speed:g}, each ride x{opts.duplication}"
    if opts.duration_s:
        end = opts.duration_s
        schedule = itertools.takewhile(lambda item: item[0] < end, schedule)
        pacing += f", first {opts.duration_s:g} s"
    return schedule, pacing, None


def build_sink(opts: ProduceOptions, notify: Notify) -> tuple[Sink, str]:
    """A Kafka sink (topic created with `partitions` if missing) or an MQTT sink when `mqtt` is set."""
    if opts.mqtt:
        host, _, port = opts.mqtt.rpartition(":")
        if not port.isdigit():
            raise UserError(f"--mqtt must be host:port, got {opts.mqtt!r}")
        client_id = run_client_id(opts)
        security = mqtt_security()
        endpoint = MqttEndpoint(host or "127.0.0.1", int(port), opts.keepalive_s, security.configure)
        outbox = Outbox(outbox_path(opts, client_id)) if opts.qos == 1 and opts.confirm else None
        confirm = KafkaConfirm(opts.kafka, opts.topic) if outbox is not None else None
        sink = MqttSink(endpoint, opts.mqtt_topic, opts.qos, notify, client_id, outbox=outbox, confirm=confirm,
                        bridge_wait_s=opts.give_up_after_s)  # fmt: skip
        where = (f"MQTT {opts.mqtt} ({security.describe()}) topic {opts.mqtt_topic} (QoS {opts.qos}, client id "
                 f"{client_id})")
        if confirm is not None:
            where += f", confirmed in Kafka {opts.kafka} topic {opts.topic}"
        return sink, where
    from gesscale.brokers.topics import ensure_topic

    partitions = ensure_topic(opts.kafka, opts.topic, opts.partitions)
    return KafkaSink(opts.kafka, opts.topic, notify), f"Kafka {opts.kafka} topic {opts.topic} ({partitions} partitions)"


@dataclass
class PreparedRun:
    """A checked, connected run waiting to start: every user mistake has surfaced by now."""

    source: RideSource
    schedule: Iterable[Scheduled[RideEncoder]]
    pacing: str
    planned: int | None
    sink: Sink
    destination: str
    limit: int | None
    give_up_after_s: float | None = None
    resumed: ResumeCount | None = None

    def run(self, progress: Callable[[ReplayStats], None] | None = None) -> ProduceResult:
        """Replay to the end (or the limit, or Ctrl-C), then close the sink."""
        try:
            stats = replay(self.schedule, self.sink, limit=self.limit, planned=self.planned, progress=progress,
                           give_up_after_s=self.give_up_after_s)
        finally:
            self.sink.close()
        return ProduceResult(stats=stats, source=self.source, destination=self.destination, pacing=self.pacing,
                             resumed=self.resumed)


def prepare(opts: ProduceOptions, notify: Notify) -> PreparedRun:
    """Check the options, open the source (a bad file fails before any broker is contacted), connect the sink."""
    _check(opts)
    source = build_source(opts)
    schedule, pacing, planned = build_schedule(opts, source)
    sink, destination = build_sink(opts, notify)
    resumed = None
    if opts.resume:
        resumed = ResumeCount()
        held = held_ids(opts.kafka, opts.topic)
        if isinstance(sink, MqttSink) and sink.outbox is not None:
            held |= sink.outbox.ids()  # the outbox publishes these again itself
        schedule = skip_held(schedule, held, resumed)
        pacing += ", resumed (records the topic holds are skipped)"
    return PreparedRun(source, schedule, pacing, planned, sink, destination, opts.limit, opts.give_up_after_s,
                       resumed)


def produce(
    opts: ProduceOptions, notify: Notify, progress: Callable[[ReplayStats], None] | None = None
) -> ProduceResult:
    """Run one replay to the end (or `limit`, or Ctrl-C) and return its figures."""
    return prepare(opts, notify).run(progress)
