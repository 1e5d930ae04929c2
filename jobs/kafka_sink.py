"""Exactly-once output to Kafka from `foreachBatch`, without Kafka transactions.

The job is the only writer of its output topic, and a micro-batch always holds the same rows when Spark runs it
again (same offsets from the checkpoint, a deterministic query, and for a stateful query the state of the same
version). So:

1. Before batch N writes, the driver records the end offsets of the output (and dead-letter) topic in
   `<checkpoint>/gesscale-sink/N` (once: if the file exists, batch N is a replay after a crash).
2. Every row goes to a partition that depends on the row alone (`output_partition`): `source partition mod
   partitions` when the query kept the input's `partition`, so one task touches few output partitions.
3. A task that may follow a partial write — a replayed batch, a retried task, a task of a stage run again —
   first reads its output partitions from the recorded offsets and skips every key already there. Keys are
   unique (the query's contract, `jobs/query.py`), so no key is written twice and none is lost.

A first attempt of a fresh batch writes straight away: the scan costs nothing in the common case. The
dead-letter topic gets the same treatment from the source's parsing tasks (`jobs.kafka_source.read_rides`).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.kafka_io import read_keys, written_keys
from jobs.produce import BatchProducer

SINK_LOG_DIR = "gesscale-sink"
KEEP_ENTRIES = 100
COUNTS_SCHEMA = "written long, skipped long"
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
    """What each write task needs: where to write, how many partitions the output has, and the batch's start
    offsets of the output topic."""

    bootstrap: str  # the Kafka of the output topic: the producer and the replay's key scan use it
    output: str
    partitions: int
    starts: dict[int, int]
    replay: bool


def _attempt() -> int:
    """>0 when this task is a retry (it may follow a partial write)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def output_partition(key: bytes, source_partition: int | None, partitions: int) -> int:
    """`source partition mod partitions` when the row kept its input partition, else CRC-32 of the key mod
    partitions: a function of the row alone, so a replayed row goes where it went the first time."""
    if source_partition is not None:
        return source_partition % partitions
    return zlib.crc32(key) % partitions


def _as_bytes(values: list[Any]) -> list[bytes]:
    return [v.encode() if isinstance(v, str) else v for v in values]


def write_partition(batches: Iterator[Any], spec: WriteSpec) -> Iterator[Any]:
    """`mapInArrow` body: send the query's output rows of one task to Kafka and yield one row of counts.

    Input columns: `key`, `value` (string or binary) and optionally `partition` (`output_partition`). Rows
    without `partition` come from a query that shuffled (an aggregation: few rows), after which a task can be
    run again without being a retry (its stage resubmitted when a shuffle block was lost; PySpark's TaskContext
    does not say so): for them a task also skips keys whenever its output partition grew since the batch
    began (`written_keys`)."""
    import pyarrow as pa

    careful = spec.replay or _attempt() > 0
    seen: dict[int, set[bytes]] = {}
    counts = {"written": 0, "skipped": 0}
    writer = BatchProducer(spec.bootstrap)
    try:
        for batch in batches:
            keys = _as_bytes(batch.column("key").to_pylist())
            values = _as_bytes(batch.column("value").to_pylist())
            names = batch.schema.names
            sources = batch.column("partition").to_pylist() if "partition" in names else [None] * len(keys)
            for key, value, src in zip(keys, values, sources, strict=True):
                part = output_partition(key, src, spec.partitions)
                if careful or src is None:
                    if part not in seen:
                        seen[part] = (read_keys(spec.bootstrap, spec.output, part, spec.starts[part]) if careful
                                      else written_keys(spec.bootstrap, spec.output, part, spec.starts[part], False))
                    if key in seen[part]:
                        counts["skipped"] += 1
                        continue
                writer.send(spec.output, part, key, value)
                counts["written"] += 1
        writer.flush()
    finally:
        writer.close()
    yield pa.RecordBatch.from_pydict({k: [v] for k, v in counts.items()},
                                     schema=pa.schema([(k, pa.int64()) for k in counts]))
