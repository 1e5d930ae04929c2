"""Read back which records a topic really holds since a moment, to catch records a broker acknowledged and lost.

Used by the Kafka sink after an outage (noida-db was measured to lose records it had acknowledged around a
stop or crash, see docs/data-plane.md). Records are recognised by their unique `key` field, which every record
of the producer starts with (`{"key": "<ride_id>-<dup>", ...`).
"""

from __future__ import annotations

import re
import time

_KEY = re.compile(rb'^\{"key": "((?:[^"\\]|\\.)*)"')


def record_id(value: bytes) -> bytes | None:
    """The raw (JSON-escaped) `key` of a producer record, or None for anything else."""
    match = _KEY.match(value)
    return match.group(1) if match else None


def record_ids_since(bootstrap: str, topic: str, since_ms: int, settle_s: float = 1.0,
                     timeout_s: float = 120.0) -> set[bytes]:  # fmt: skip
    """Keys of the records of `topic` stamped at or after `since_ms`, read to the current end.

    Starts at `offsets_for_times(since_ms)` per partition (from the beginning when the broker has no answer),
    reads until the end offsets taken now are reached and nothing more arrives for `settle_s` (brokers that
    under-report end offsets cannot cut it short), or `timeout_s` passes.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="gesscale-verify", enable_auto_commit=False,
                             max_poll_records=10_000)  # fmt: skip
    found: set[bytes] = set()
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(parts)
        starts = consumer.offsets_for_times({tp: since_ms for tp in parts})
        ends = consumer.end_offsets(parts)
        remaining = set()
        for tp in parts:
            start = starts.get(tp)
            consumer.seek(tp, start.offset if start is not None else ends[tp])
            if start is not None and start.offset < ends[tp]:
                remaining.add(tp)
        deadline = time.monotonic() + timeout_s
        last_data = time.monotonic()
        while time.monotonic() < deadline:
            if not remaining and time.monotonic() - last_data >= settle_s:
                break
            for tp, messages in consumer.poll(timeout_ms=200).items():
                for msg in messages:
                    rid = record_id(msg.value)
                    if rid is not None:
                        found.add(rid)
                if messages:
                    last_data = time.monotonic()
                    if messages[-1].offset + 1 >= ends[tp]:
                        remaining.discard(tp)
    finally:
        consumer.close()
    return found
