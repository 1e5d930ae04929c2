"""Exactly-once accounting by unique record keys: produced vs processed, lost, duplicated.

Every ride record carries a unique key (`<ride>-<dup>`, producer/records.py). After a run:
- produced = distinct keys in the input topic (a record the producer re-sent after an outage has the same key,
  so it is counted once);
- processed = distinct input keys found in the output or the dead-letter topic;
- lost = input keys found in neither; duplicated = output + dead-letter records beyond the first per key.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kafka import KafkaConsumer, TopicPartition


def key_counts(bootstrap: str, topic: str, idle_polls: int = 30) -> Counter[bytes]:
    """How many records carry each key in `topic`, read from the beginning to the current end offsets."""
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
                counts.update(r.key for r in records if r.offset < ends[tp])
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

    def to_dict(self) -> dict[str, int]:
        """JSON form (integers)."""
        return {"produced": self.produced, "processed": self.processed, "lost": self.lost,
                "duplicated": self.duplicated, "dead_letters": self.dead_letters}


def account(bootstrap: str, input_topic: str, output_topic: str, dead_letter_topic: str) -> Accounting:
    """Compare the keys of the input with those of the output and dead-letter topics."""
    produced = key_counts(bootstrap, input_topic)
    out = key_counts(bootstrap, output_topic)
    dead = key_counts(bootstrap, dead_letter_topic)
    done = out + dead
    inputs = set(produced)
    processed = sum(1 for k in done if k in inputs)
    return Accounting(
        produced=len(inputs),
        processed=processed,
        lost=len(inputs) - processed,
        duplicated=sum(c - 1 for c in done.values() if c > 1),
        dead_letters=sum(dead.values()),
    )
