"""Read back which records a topic really holds since a moment, to catch records a broker acknowledged and lost.

Used by the Kafka sink after an outage (noida-db was measured to lose records it had acknowledged around a
stop or crash, see docs/data-plane.md). Records are recognised by their unique `key` field, which every record
of the producer starts with (`{"key": "<ride_id>-<dup>", ...`).
"""

from __future__ import annotations

import re

_KEY = re.compile(rb'^\{"key": "((?:[^"\\]|\\.)*)"')


def record_id(value: bytes) -> bytes | None:
    """The raw (JSON-escaped) `key` of a producer record, or None for anything else."""
    match = _KEY.match(value)
    return match.group(1) if match else None


def record_ids_since(bootstrap: str, topic: str, since_ms: int, settle_s: float = 1.0) -> set[bytes]:
    """Keys of the records of `topic` stamped at or after `since_ms`, read to the current end.

    Starts at `offsets_for_times(since_ms)` per partition; see `read_values` for when the read ends (a broker
    that under-reports end offsets cannot cut it short).
    """
    from gesscale.brokers.topics import read_values

    found = (record_id(value) for _, _, value in read_values(bootstrap, topic, settle_s=settle_s, since_ms=since_ms))
    return {rid for rid in found if rid is not None}
