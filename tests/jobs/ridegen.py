"""Test data for the job: ride records in the producer's format, produced with kafka-python, and read back."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

MALFORMED = (
    b"not json at all",
    b'{"key": "truncated',
    b"[1, 2, 3]",
    b'{"ride_id": "r1", "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7}',
    b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": "west", "pickup_lat": 40.7}',
    b'{"key": "k", "ride_id": "r", "event_time": "yesterday", "pickup_lon": -73.9, "pickup_lat": 40.7}',
    b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 140.7}',
)


def ride(i: int, rnd: random.Random) -> dict:
    """One ride in the producer's record format; `key` is unique per i."""
    rid = f"ride{i:09d}"
    return {
        "key": f"{rid}-0", "ride_id": rid, "dup": 0,
        "event_time": f"2013-05-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}",
        "pickup_time": "2013-05-01 00:00:00", "dropoff_time": "2013-05-01 00:12:00",
        "pickup_lon": -74.05 + rnd.random() * 0.15, "pickup_lat": 40.65 + rnd.random() * 0.2,
        "dropoff_lon": -73.95, "dropoff_lat": 40.78, "trip_time_s": 720, "distance_mi": 2.1,
        "medallion": f"M{i % 97}",
    }


def values(n: int, malformed_every: int = 0, seed: int = 1, first: int = 0) -> Iterator[tuple[bytes, bytes, bool]]:
    """(message key, value, is_good) for records first..first+n-1; every `malformed_every`-th one is malformed."""
    rnd = random.Random(seed + first)
    for i in range(first, first + n):
        if malformed_every and i % malformed_every == malformed_every - 1:
            yield f"bad{i}".encode(), MALFORMED[i % len(MALFORMED)], False
        else:
            rec = ride(i, rnd)
            yield rec["ride_id"].encode(), json.dumps(rec).encode(), True


def produce(bootstrap: str, topic: str, n: int, partitions: int, malformed_every: int = 0,
            first: int = 0) -> set[bytes]:
    """Write records first..first+n-1 round-robin over the partitions; returns the `key`s of the good ones."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20)
    good: set[bytes] = set()
    for i, (key, value, ok) in enumerate(values(n, malformed_every, first=first)):
        producer.send(topic, key=key, value=value, partition=i % partitions)
        if ok:
            good.add(json.loads(value)["key"].encode())
    producer.flush()
    producer.close()
    return good


def read_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """Every (key, value) in the topic, up to its end offsets now."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             check_crcs=False, max_partition_fetch_bytes=16 << 20)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[tuple[bytes, bytes]] = []
        idle = 0
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            got = consumer.poll(timeout_ms=1000, max_records=100_000)
            idle = 0 if got else idle + 1
            assert idle < 30, f"reading {topic} stalled"
            for tp, recs in got.items():
                out.extend((r.key, r.value) for r in recs if r.offset < ends[tp])
        return out
    finally:
        consumer.close()
