"""Broker conformance: the Kafka behaviour the toolkit relies on, against the embedded default broker (or a
real Kafka when KAFKA_BOOTSTRAP is set). The same probes back `gesscale broker check`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gesscale.brokers import DEFAULT_KAFKA_IMPL, start_kafka
from gesscale.brokers.conformance import PROBES, ConformanceResult
from gesscale.brokers.topics import end_offsets, ensure_topic, read_values
from gesscale.process import free_port
from tests.fixtures.kafka import KAFKA_PORTS, scratch_dir


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.__name__.removeprefix("probe_"))
def test_probe(kafka_bootstrap: str, probe: Callable[[str], ConformanceResult]) -> None:
    result = probe(kafka_bootstrap)
    assert result.ok, f"{result.name}: {result.detail}"


def test_topic_factory_makes_distinct_topics_with_partitions(kafka_bootstrap: str, kafka_topic_factory) -> None:
    a, b = kafka_topic_factory(partitions=4), kafka_topic_factory(partitions=2)
    assert a != b
    assert ensure_topic(kafka_bootstrap, a, 99) == 4  # exists already: left as it is
    assert ensure_topic(kafka_bootstrap, b, 99) == 2


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i in range(n):
        producer.send(topic, key=str(i).encode(), value=f"v{i}".encode())
    producer.flush(timeout=30)
    producer.close()


def test_data_survives_a_graceful_restart() -> None:
    """The embedded default broker keeps topics, records and offsets across stop/start on its data dir."""
    scratch = scratch_dir("gesscale-restart-")
    try:
        with start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka", impl=DEFAULT_KAFKA_IMPL) as broker:
            ensure_topic(broker.bootstrap, "durable", 3)
            _produce(broker.bootstrap, "durable", 600)
            before = end_offsets(broker.bootstrap, "durable")
            broker.restart()
            after = end_offsets(broker.bootstrap, "durable")
            values = sorted(v for _, _, v in read_values(broker.bootstrap, "durable"))
        assert sum(before.values()) == 600
        assert after == before
        assert values == sorted(f"v{i}".encode() for i in range(600))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _wait_until_saved(state: Path, after: float, quiet_s: float = 2.5, timeout_s: float = 60.0) -> None:
    """Wait until `state` was written after `after` and then left alone for `quiet_s` (no save pending)."""
    deadline = time.monotonic() + timeout_s
    last, still_since = None, time.monotonic()
    while time.monotonic() < deadline:
        mtime = state.stat().st_mtime if state.exists() else None
        if mtime != last:
            last, still_since = mtime, time.monotonic()
        elif mtime is not None and mtime > after and time.monotonic() - still_since >= quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError(f"{state} was not saved after the last write")


def test_data_survives_a_crash_once_saved() -> None:
    """noida-db saves its whole state about once a second while it changes; what was saved survives kill -9."""
    scratch = scratch_dir("gesscale-crash-")
    try:
        with start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka", impl=DEFAULT_KAFKA_IMPL) as broker:
            ensure_topic(broker.bootstrap, "durable", 2)
            _produce(broker.bootstrap, "durable", 300)
            _wait_until_saved(scratch / "kafka" / "kafka.json", after=time.time() - 0.01)
            broker.kill()
            broker.restart()
            assert sum(end_offsets(broker.bootstrap, "durable").values()) == 300
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
