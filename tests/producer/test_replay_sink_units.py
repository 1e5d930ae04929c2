"""The replay loop and the Kafka sink's bookkeeping without a broker: a fake clock, a recording sink, and a
stand-in for kafka-python's KafkaProducer whose futures the test resolves."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest
from kafka.errors import KafkaTimeoutError
from kafka.future import Future

from producer.keyhash import key_hash, key_partition
from producer.records import Ride, RideEncoder
from producer.replay import replay
from producer.schedule import by_rate_profile

T0 = datetime(2013, 5, 1)


def _encoders(n: int) -> list[RideEncoder]:
    return [
        RideEncoder(Ride(f"r{i}", "M", T0, T0 + timedelta(seconds=i), 60, 0.5, -73.98, 40.75, -73.97, 40.76))
        for i in range(n)
    ]


class FakeClock:
    """time.monotonic and time.sleep of a replay, with time passing only when the loop sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


class RecordingSink:
    """Acknowledges everything at once; remembers what was sent and when."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.records: list[tuple[bytes, bytes, int | None, float]] = []
        self.acked = self.resent = self.restored = 0

    def send(self, key: bytes, value: bytes, key_hash: int | None = None) -> None:
        self.records.append((key, value, key_hash, self.clock.now))

    def service(self) -> None:
        self.acked = len(self.records)

    def pending(self) -> int:
        return len(self.records) - self.acked

    def drain(self, timeout_s: float) -> bool:
        self.acked = len(self.records)
        return True

    def down_for(self, now: float) -> float:
        return 0.0

    def verify(self, timeout_s: float) -> None:
        return None

    def close(self) -> None:
        pass


def test_replay_sends_every_record_on_time_in_order() -> None:
    fake = FakeClock()
    sink = RecordingSink(fake)
    encoders = _encoders(30)
    schedule = list(by_rate_profile(encoders, [20, 20, 20], duplication=2))  # 60 records over 3 s
    reports = []
    stats = replay(schedule, sink, clock=fake.clock, sleep=fake.sleep, progress=lambda s: reports.append(s.sent))
    assert stats.sent == stats.acked == len(sink.records) == 60 and stats.drained
    expected = [(e.key_bytes, e.value(d), e.key_hash) for _, e, d in schedule]
    assert [r[:3] for r in sink.records] == expected
    for (due, _, _), (*_, sent_at) in zip(schedule, sink.records, strict=True):
        assert due <= sent_at < due + 0.06  # never early, at most one sleep step late
    assert stats.last_due_s == schedule[-1][0] and stats.worst_lag_s < 0.06
    assert abs(stats.achieved_rate - stats.target_rate) / stats.target_rate < 0.05
    assert reports and reports[-1] == 60


def test_replay_stops_at_the_limit() -> None:
    fake = FakeClock()
    sink = RecordingSink(fake)
    schedule = by_rate_profile(itertools.cycle(_encoders(5)), [1_000_000], duplication=3)
    stats = replay(schedule, sink, limit=2500, clock=fake.clock, sleep=fake.sleep)
    assert stats.sent == len(sink.records) == 2500
    assert len({(k, v) for k, v, *_ in sink.records}) == 15  # 5 rides x 3 copies, cycled


class StubProducer:
    """Stands in for kafka.KafkaProducer: records sends, hands out futures the test resolves."""

    instances: list[StubProducer] = []

    def __init__(self, **config) -> None:
        self.config = config
        self.sent: list[tuple[bytes, bytes, int | None, Future]] = []
        StubProducer.instances.append(self)

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2, 3, 4}

    def send(self, topic: str, key: bytes, value: bytes, partition: int | None = None) -> Future:
        future = Future()
        self.sent.append((key, value, partition, future))
        return future

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


@pytest.fixture
def stub_sink(monkeypatch):
    import kafka

    from producer.sinks import KafkaSink

    monkeypatch.setattr(kafka, "KafkaProducer", StubProducer)
    notes: list[str] = []
    sink = KafkaSink("stub:9092", "rides", notes.append)
    return sink, StubProducer.instances[-1], notes


def test_kafka_sink_places_keys_as_kafkas_default_partitioner(stub_sink) -> None:
    sink, client, _ = stub_sink
    assert client.config["acks"] == "all" and client.config["enable_idempotence"] is False
    encoders = _encoders(40)
    for enc in encoders[:20]:
        sink.send(enc.key_bytes, enc.value(0), enc.key_hash)
    for enc in encoders[20:]:
        sink.send(enc.key_bytes, enc.value(0))  # no hash given: the sink computes it
    assert [p for _, _, p, _ in client.sent] == [key_partition(e.key_bytes, [0, 1, 2, 3, 4]) for e in encoders]
    assert len({p for _, _, p, _ in client.sent}) > 1


def test_kafka_sink_counts_acks_and_queues_failures_for_retry(stub_sink) -> None:
    sink, client, notes = stub_sink
    encoders = _encoders(10)
    for enc in encoders:
        sink.send(enc.key_bytes, enc.value(0), key_hash(enc.key_bytes))
    futures = [f for *_, f in client.sent]
    for f in futures[:6]:
        f.success(None)
    futures[6].failure(KafkaTimeoutError("expired"))
    sink.service()
    assert sink.acked == 6
    assert sink.pending() == 5  # 3 in flight + 1 waiting for a retry + the read-back due after the outage
    assert any("unreachable" in n for n in notes)
    late = _encoders(11)[10]
    sink.send(late.key_bytes, late.value(0))  # queues behind the failed record, not handed to the client yet
    assert len(client.sent) == 10
    for f in futures[7:]:
        f.success(None)
    sink.service()
    assert sink.acked == 9 and sink.pending() == 3  # the failed one and the late one are not acknowledged


def test_kafka_sink_resends_after_backoff_and_restores_what_the_broker_lost(stub_sink, monkeypatch) -> None:
    import producer.verify

    sink, client, notes = stub_sink
    encoders = _encoders(10)
    for enc in encoders:
        sink.send(enc.key_bytes, enc.value(0), enc.key_hash)
    for f in [f for *_, f in client.sent][:9]:
        f.success(None)
    client.sent[9][3].failure(KafkaTimeoutError("expired"))
    sink.service()
    assert sink.acked == 9 and len(client.sent) == 10
    sink._backoff.next_at = 0.0  # the backoff has passed
    sink.service()
    assert sink.resent == 1 and client.sent[10][0] == encoders[9].key_bytes
    client.sent[10][3].success(None)
    # The broker is back but lost record 3, which it had acknowledged (noida-db did this around a stop).
    held = {f"r{i}-0".encode() for i in range(10) if i != 3}
    monkeypatch.setattr(producer.verify, "record_ids_since", lambda *args, **kwargs: held)
    sink.service()  # outage over: acks flow again
    sink.service()  # everything sent before is acknowledged: read back and re-send what is missing
    assert sink.restored == 1 and client.sent[-1][0] == encoders[3].key_bytes
    assert any("back after" in n for n in notes) and any("1 missing" in n for n in notes)
    client.sent[-1][3].success(None)
    assert sink.drain(1.0) and sink.pending() == 0
    assert sink.acked == 10  # the restored copy was counted once already
