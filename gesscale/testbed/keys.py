"""Exactly-once accounting by unique record keys: produced vs processed, lost, duplicated.

Every ride record carries a unique key (`<ride>-<dup>`, the `key` field of its JSON value; the Kafka message
key is the ride id, shared by the copies — producer/records.py). The job writes a good record keyed by that
unique key and a dead letter keyed by where it was read, `<topic>/<partition>/<offset>` (jobs/records.py).
After a run:
- produced = distinct unique keys in the input topic (a record the producer re-sent after an outage has the
  same key, so it is counted once);
- processed = those found in the output topic, or whose input position is in the dead-letter topic;
- unprocessed = records the job had not read yet when it was stopped (at or past the offsets of its last
  committed micro-batch, from its checkpoint): a run stopped with a backlog leaves those, they are not lost;
- lost = produced − processed − unprocessed; duplicated = output and dead-letter records beyond the first per key.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition


def _message_key(record: Any) -> bytes:
    return record.key


def key_counts(bootstrap: str, topic: str, idle_polls: int = 30,
               key_of: Callable[[Any], bytes] = _message_key) -> Counter[bytes]:
    """How many records carry each key (`key_of(record)`) in `topic`, from the beginning to the end offsets."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             check_crcs=False, max_partition_fetch_bytes=16 << 20, fetch_max_bytes=64 << 20)
    counts: Counter[bytes] = Counter()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            return counts
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        todo = {tp for tp in tps if ends[tp] > 0}
        idle = 0
        while todo:
            got = consumer.poll(timeout_ms=1000, max_records=50_000)
            idle = 0 if got else idle + 1
            if idle >= idle_polls:
                raise TimeoutError(f"{topic}: no progress for {idle_polls} s while counting keys")
            for tp, records in got.items():
                counts.update(key_of(r) for r in records if r.offset < ends[tp])
            todo = {tp for tp in todo if (consumer.position(tp) or 0) < ends[tp]}
        return counts
    finally:
        consumer.close()


@dataclass(frozen=True)
class Accounting:
    """The exactly-once figures of one run."""

    produced: int
    processed: int
    lost: int
    duplicated: int
    dead_letters: int
    unprocessed: int = 0

    def to_dict(self) -> dict[str, int]:
        """JSON form (integers)."""
        return {"produced": self.produced, "processed": self.processed, "lost": self.lost,
                "duplicated": self.duplicated, "dead_letters": self.dead_letters, "unprocessed": self.unprocessed}


def committed_offsets(checkpoint: Path) -> dict[int, int] | None:
    """Input offsets up to which the job's last committed micro-batch read (None before the first commit)."""
    try:
        commits = [int(p.name) for p in (Path(checkpoint) / "commits").iterdir() if p.name.isdigit()]
        if not commits:
            return None
        lines = (Path(checkpoint) / "offsets" / str(max(commits))).read_text().splitlines()
        return {int(k): int(v) for k, v in json.loads(lines[-1]).items()}
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def input_identity(topic: str) -> Callable[[Any], bytes]:
    """Identity of an input record: its unique `key` field, or `<topic>/<partition>/<offset>` when unparseable."""

    def identity(record: Any) -> bytes:
        try:
            key = json.loads(record.value)["key"]
            if isinstance(key, str) and key:
                return key.encode()
        except (ValueError, TypeError, KeyError):
            pass
        return f"{topic}/{record.partition}/{record.offset}".encode()

    def both(record: Any) -> bytes:
        return identity(record) + b"\0" + f"{topic}/{record.partition}/{record.offset}".encode()

    return both


def account(bootstrap: str, input_topic: str, output_topic: str, dead_letter_topic: str,
            consumed: dict[int, int] | None = None) -> Accounting:
    """Compare the records of the input with those of the output and dead-letter topics (see module doc).

    `consumed` (from `committed_offsets`) tells which input records the job had read when it stopped.
    """
    inputs = key_counts(bootstrap, input_topic, key_of=input_identity(input_topic))
    out = key_counts(bootstrap, output_topic)
    dead = key_counts(bootstrap, dead_letter_topic)
    done: dict[bytes, bool] = {}
    pending: dict[bytes, bool] = {}
    for ident in inputs:
        key, _, origin = ident.partition(b"\0")
        done[key] = done.get(key, False) or key in out or origin in dead
        _, part, offset = origin.decode().rsplit("/", 2)
        unread = consumed is not None and int(offset) >= consumed.get(int(part), 0)
        pending[key] = pending.get(key, True) and unread
    processed = sum(done.values())
    unprocessed = sum(1 for k, d in done.items() if not d and pending[k])
    return Accounting(
        produced=len(done),
        processed=processed,
        lost=len(done) - processed - unprocessed,
        duplicated=sum(c - 1 for c in out.values() if c > 1) + sum(c - 1 for c in dead.values() if c > 1),
        dead_letters=sum(dead.values()),
        unprocessed=unprocessed,
    )
