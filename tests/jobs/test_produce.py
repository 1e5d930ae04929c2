"""The sink's own record-batch encoder and Produce requests, checked against kafka-python's decoder and a
real broker."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch

from jobs.produce import CODECS, MAX_BATCH_BYTES, BatchProducer, ProduceError, _Buffer, encode_batch, encode_record
from tests.jobs import ridegen


@pytest.mark.parametrize("compression", list(CODECS))
def test_encoded_batch_decodes_with_kafka_python(compression: str) -> None:
    values = [b"v" * (i * 37) for i in range(400)]  # lengths past one and two varint bytes
    keys = [None if i % 7 == 0 else f"key-{i}".encode() for i in range(400)]
    batch = DefaultRecordBatch(bytearray(encode_batch(
        [encode_record(i, k, v) for i, (k, v) in enumerate(zip(keys, values, strict=True))], 1_700_000_000_123,
        compression)))
    assert batch.magic == 2 and batch.validate_crc()
    assert batch.compression_type == CODECS[compression]
    records = list(batch)
    assert [r.offset for r in records] == list(range(400))
    assert [r.key for r in records] == keys
    assert [r.value for r in records] == values
    assert {r.timestamp for r in records} == {1_700_000_000_123}
    assert all(r.headers == [] for r in records)


def test_the_producers_buffer_encodes_like_encode_record() -> None:
    buf = _Buffer()
    records = []
    for i in range(300):  # offset deltas, key and value lengths past one varint byte
        key, value = (None if i % 5 == 0 else b"k" * i), b"v" * (i * 53)
        buf.add(key, value)
        records.append(encode_record(i, key, value))
    assert buf.count == 300 and buf.size == sum(map(len, records))
    assert buf.batch(1_700_000_000_123, "none") == encode_batch(records, 1_700_000_000_123)


@pytest.mark.parametrize("compression", list(CODECS))
def test_batches_reach_the_broker_in_order(kafka_bootstrap: str, kafka_topic_factory: Any, compression: str) -> None:
    topic = kafka_topic_factory(partitions=2, prefix="produce")
    producer = BatchProducer(kafka_bootstrap, compression=compression)
    value = b"x" * 300
    n = 2 * MAX_BATCH_BYTES // 300 + 17  # several full batches plus a partial one per partition
    try:
        for i in range(n):
            producer.send(topic, i % 2, f"k{i}".encode(), value + str(i).encode())
        producer.flush()
    finally:
        producer.close()
    got = ridegen.read_all(kafka_bootstrap, topic)
    assert sorted(k for k, _ in got) == sorted(f"k{i}".encode() for i in range(n))
    assert dict(got)[b"k5"] == value + b"5"


def test_unknown_topic_is_an_error(kafka_bootstrap: str) -> None:
    producer = BatchProducer(kafka_bootstrap)
    try:
        producer.send("no-such-topic-for-produce", 0, b"k", b"v")
        with pytest.raises(ProduceError):
            producer.flush()
    finally:
        producer.close()


def test_connect_opens_the_leader_connection_and_sends_nothing(kafka_bootstrap: str, kafka_topic_factory: Any) -> None:
    topic = kafka_topic_factory(partitions=1, prefix="connect")
    producer = BatchProducer(kafka_bootstrap)
    try:
        producer.connect(topic, 0)
        assert len(producer._conns) == 1
        producer.flush()
        with pytest.raises(ProduceError, match="does not exist|no leader"):
            producer.connect("no-such-topic-for-connect", 0)
    finally:
        producer.close()
    assert ridegen.read_all(kafka_bootstrap, topic) == []


def test_the_warm_up_range_is_the_last_records_of_a_partition() -> None:
    from jobs.warm import warm_range

    assert warm_range(10_000) == (9_800, 10_000)
    assert warm_range(50) == (0, 50)
    assert warm_range(0) == (0, 0)
