"""Exactly-once output to Kafka from `foreachBatch`, without Kafka transactions.

The job is the only writer of its output and dead-letter topics, and a micro-batch always holds the same
records when Spark runs it again (same offsets from the checkpoint, deterministic transform). So:

1. Before batch N writes, the driver records the end offsets of both topics in `<checkpoint>/gesscale-sink/N`
   (once: if the file exists, batch N is a replay after a crash).
2. Every record goes to partition `source partition mod partitions of the topic`, so one task touches few
   output partitions.
3. A task that may follow a partial write — a replayed batch, or a retried task (attempt > 0) — first reads its
   output partitions from the recorded offsets and skips every key already there. Keys are unique (the
   record's `key`, or `topic/partition/offset` for dead letters), so no key is written twice and none is lost.

A first attempt of a fresh batch writes straight away: the scan costs nothing in the common case.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.kafka_io import read_keys
from jobs.produce import BatchProducer
from jobs.records import BadRecord, dead_letter, enrich

SINK_LOG_DIR = "gesscale-sink"
KEEP_ENTRIES = 100
COUNTS_SCHEMA = "written long, dead_letters long, skipped long"
TopicOffsets = dict[str, dict[int, int]]


class SinkLog:
    """Per-batch record of the output topics' end offsets before the batch wrote, in the checkpoint folder."""

    def __init__(self, checkpoint: str | Path) -> None:
        self.dir = Path(checkpoint) / SINK_LOG_DIR
        self.dir.mkdir(parents=True, exist_ok=True)

    def begin(self, batch_id: int, snapshot: Callable[[], TopicOffsets]) -> tuple[TopicOffsets, bool]:
        """Offsets where batch `batch_id` starts writing, and whether the batch ran before (a replay)."""
        path = self.dir / str(batch_id)
        if path.exists():
            data = json.loads(path.read_text())
            return {t: {int(p): int(o) for p, o in offs.items()} for t, offs in data.items()}, True
        starts = snapshot()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({t: {str(p): o for p, o in offs.items()} for t, offs in starts.items()}))
        os.replace(tmp, path)
        self._prune(batch_id)
        return starts, False

    def _prune(self, batch_id: int) -> None:
        for entry in self.dir.iterdir():
            if entry.name.isdigit() and int(entry.name) <= batch_id - KEEP_ENTRIES:
                entry.unlink(missing_ok=True)


@dataclass(frozen=True)
class WriteSpec:
    """What each write task needs: where to write, how topics are partitioned, and the batch's start offsets."""

    bootstrap: str  # the Kafka of the output and dead-letter topics: the producer and the replay's key scan use it
    input: str
    output: str
    dead_letter: str
    partitions: dict[str, int]
    starts: TopicOffsets
    replay: bool
    write_good: bool = True


def _attempt() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def write_partition(batches: Iterator[Any], spec: WriteSpec) -> Iterator[Any]:
    """`mapInArrow` body: enrich the source rows of one task, send them to Kafka and yield one row of counts.

    Input columns: `partition` (source partition), `offset`, `value` (the raw Kafka value). Good records go to
    the output topic keyed by their `key`, bad ones to the dead-letter topic (see `jobs/records.py`).
    """
    import pyarrow as pa

    careful = spec.replay or _attempt() > 0
    seen: dict[tuple[str, int], set[bytes]] = {}
    counts = {"written": 0, "dead_letters": 0, "skipped": 0}
    writer = BatchProducer(spec.bootstrap)
    out_parts, dead_parts = spec.partitions.get(spec.output, 0), spec.partitions[spec.dead_letter]
    try:
        for batch in batches:
            sources = batch.column("partition").to_pylist()
            values = batch.column("value").to_pylist()
            for i, value in enumerate(values):
                try:
                    key, out = enrich(value)
                except BadRecord as bad:
                    src = sources[i]
                    key, out = dead_letter(bad.reason, spec.input, src, batch.column("offset")[i].as_py(), value)
                    topic, part, kind = spec.dead_letter, src % dead_parts, "dead_letters"
                else:
                    if not spec.write_good:
                        continue
                    topic, part, kind = spec.output, sources[i] % out_parts, "written"
                if careful:
                    tp = (topic, part)
                    if tp not in seen:
                        seen[tp] = read_keys(spec.bootstrap, topic, part, spec.starts[topic][part])
                    if key in seen[tp]:
                        counts["skipped"] += 1
                        continue
                writer.send(topic, part, key, out)
                counts[kind] += 1
        writer.flush()
    finally:
        writer.close()
    yield pa.RecordBatch.from_pydict({k: [v] for k, v in counts.items()},
                                     schema=pa.schema([(k, pa.int64()) for k in counts]))
