"""Kafka as a Spark streaming source, written with the Python Data Source API over kafka-python.

Why not Spark's JVM Kafka connector: pyspark from PyPI ships no `spark-sql-kafka` jar and this project's
machines reach no Maven repository, so the JVM connector cannot be installed the way everything else is. The
Python Data Source API (PySpark ≥ 4.0) gives the same contract: offsets live in Spark's checkpoint (the
source of truth; nothing is committed to a consumer group), `latestOffset` admits at most `maxRowsPerBatch`
records (`ReadMaxRows`), `partitions` cuts the batch into per-partition ranges, `read` runs on the executors,
and `reportLatestOffset` exposes the broker's end offsets so the backlog can be computed from progress events.

Use: `spark.dataSource.register(KafkaSource)` then
`spark.readStream.format("gesscale_kafka").option("bootstrap", ...).option("topic", ...).load()`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from gesscale.brokers.security import kafka_client_config
from jobs.offsets import Offsets, Range, cap, normalise, split

SOURCE_NAME = "gesscale_kafka"
SCHEMA = "partition int, offset long, key binary, value binary, timestamp_ms long"
ARROW_ROWS = 8192  # rows per Arrow batch handed to Spark
PARSE_RIDES = "rides"  # option `parse`: yield parsed rides, dead-letter the bad records
DEAD_LETTER_LOG = "gesscale-source"  # under option `logDir`: the dead-letter topic's offsets before each batch
KEEP_LOG_ENTRIES = 100


@dataclass(frozen=True)
class DeadLetters:
    """Where a parsing task sends the bad records of its range: the dead-letter topic's partition
    `input partition mod partitions`, whose end offset was `start` before the batch wrote (`replay`: the batch
    ran before, so records may be there already)."""

    bootstrap: str
    topic: str
    partitions: int
    start: int
    replay: bool


class KafkaRangePartition(InputPartition):
    """One task's work: offsets [start, until) of one partition, with what an executor needs to fetch them
    (and, when the source parses, where the bad records go)."""

    def __init__(self, bootstrap: str, topic: str, rng: Range, poll_timeout_s: float,
                 dead: DeadLetters | None = None) -> None:
        super().__init__((rng.partition, rng.start, rng.until))
        self.bootstrap = bootstrap
        self.topic = topic
        self.range = rng
        self.poll_timeout_s = poll_timeout_s
        self.dead = dead


def fetch_size(rng: Range, record_bytes: int = 512) -> int:
    """Bytes a fetch may return for `rng`: about the range itself (records of up to ~0.5 KB; a taxi ride is ~0.2),
    between 64 KiB and 16 MiB.

    A Kafka broker answers a fetch with what it has after the position, up to about this size (whole record
    batches; the embedded noida-db ignores the size), and the client takes it all in: with a backlog, a
    500-record range fetched 16 MiB (~40 000 records) and threw almost all of it away, in the executor's CPU
    budget and the broker's. What decides is `read_range` asking for no more records than it needs; on top of
    that, a 333-record range 50 000 records behind the end took 75 ms of CPU per read with this size against
    81-129 ms with 1 MiB (noisy, a few runs)."""
    return max(64 << 10, min(16 << 20, (rng.until - rng.start) * record_bytes))


def _fetch(part: KafkaRangePartition) -> Iterator[tuple[list[int], list[Any], list[Any], list[int]]]:
    """Fetch exactly the offsets of `part` with kafka-python, in chunks of up to `ARROW_ROWS` records:
    (offsets, keys, values, timestamps)."""
    from kafka import KafkaConsumer, TopicPartition

    rng = part.range
    fetch_bytes = fetch_size(rng)
    consumer = KafkaConsumer(
        bootstrap_servers=part.bootstrap,
        enable_auto_commit=False,
        group_id=None,
        check_crcs=False,
        max_partition_fetch_bytes=fetch_bytes,
        fetch_max_bytes=fetch_bytes,
        client_id="gesscale-source",
        **kafka_client_config(),
    )
    tp = TopicPartition(part.topic, rng.partition)
    try:
        consumer.assign([tp])
        consumer.seek(tp, rng.start)
        offs: list[int] = []
        keys: list[bytes | None] = []
        vals: list[bytes | None] = []
        stamps: list[int] = []
        position = rng.start
        idle_ms = 0
        while position < rng.until:
            # no more than the range still needs: a broker may answer a fetch with all it has after the position
            # (noida-db ignores the fetch size), and the client would decode all of it (tests/jobs/test_read_range)
            got = consumer.poll(timeout_ms=500, max_records=max(1, rng.until - position)).get(tp, [])
            if not got:
                position = max(position, consumer.position(tp) or position)
                idle_ms += 500
                if position < rng.until and idle_ms >= part.poll_timeout_s * 1000:
                    raise TimeoutError(
                        f"{part.topic}[{rng.partition}]: no records for {part.poll_timeout_s:.0f} s at offset "
                        f"{position}, expected up to {rng.until}"
                    )
                continue
            idle_ms = 0
            for rec in got:
                if rec.offset < rng.start:
                    continue
                if rec.offset >= rng.until:
                    position = rng.until
                    break
                offs.append(rec.offset)
                keys.append(rec.key)
                vals.append(rec.value)
                stamps.append(rec.timestamp)
                position = rec.offset + 1
            if len(offs) >= ARROW_ROWS or (offs and position >= rng.until):
                yield offs, keys, vals, stamps
                offs, keys, vals, stamps = [], [], [], []
    finally:
        consumer.close()


def read_range(part: KafkaRangePartition) -> Iterator[Any]:
    """Fetch exactly the offsets of `part` and yield them as Arrow record batches of `SCHEMA` rows.

    Records outside [start, until) (a fetch returns whole broker batches) are dropped; offsets missing inside
    the range (compaction, transaction markers) are skipped by watching the consumer position. If the broker
    returns nothing for `poll_timeout_s` the task fails, so Spark retries it instead of producing a short batch.
    With `part.dead` set, the records are parsed instead (`read_rides`).
    """
    if part.dead is not None:
        yield from read_rides(part)
        return
    import pyarrow as pa

    schema = pa.schema(
        [("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
         ("timestamp_ms", pa.int64())]
    )
    p = part.range.partition
    for offs, keys, vals, stamps in _fetch(part):
        yield pa.RecordBatch.from_arrays(
            [pa.array([p] * len(offs), pa.int32()), pa.array(offs, pa.int64()), pa.array(keys, pa.binary()),
             pa.array(vals, pa.binary()), pa.array(stamps, pa.int64())],
            schema=schema,
        )


def _retried() -> bool:
    """Whether this task is a retry (it may follow a partial write of the same range)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx is not None and ctx.attemptNumber() > 0


def read_rides(part: KafkaRangePartition) -> Iterator[Any]:
    """Fetch the range, yield its good records parsed (`RIDES_SCHEMA` rows) and send the bad ones to the
    dead-letter topic exactly once: the scheme of `jobs.kafka_sink` (`DeadLetters` holds the batch's start
    offsets and whether it is a replay), except that a task also skips the keys already there whenever its
    dead-letter partition grew since the batch began (`written_keys`): a stage that read the input may run
    again after its shuffle output was lost with an executor, and PySpark does not say so."""
    from jobs.kafka_io import written_keys
    from jobs.produce import BatchProducer
    from jobs.records import dead_letter, split_rides

    dead = part.dead
    assert dead is not None
    p = part.range.partition
    target = p % dead.partitions
    careful = dead.replay or _retried()
    seen: set[bytes] | None = None
    writer = BatchProducer(dead.bootstrap)
    try:
        for offs, _, vals, _ in _fetch(part):
            rides, bad = split_rides(p, offs, vals)
            for offset, reason, value in bad:
                key, body = dead_letter(reason, part.topic, p, offset, value)
                if seen is None:  # bad records are rare: check once, at the first one
                    seen = written_keys(dead.bootstrap, dead.topic, target, dead.start, careful)
                if key in seen:
                    continue
                writer.send(dead.topic, target, key, body)
            if rides.num_rows:
                yield rides
        writer.flush()
    finally:
        writer.close()


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from the broker's offsets on the driver; `read` runs on the executors."""

    def __init__(self, options: Any) -> None:
        self.bootstrap = options["bootstrap"]
        self.topic = options["topic"]
        max_rows = options.get("maxRowsPerBatch")
        self.max_rows = int(max_rows) if max_rows else None
        self.max_per_range = int(options.get("maxRowsPerRange", "100000"))
        self.starting = options.get("startingOffsets", "earliest")
        self.poll_timeout_s = float(options.get("pollTimeoutSeconds", "60"))
        self.parse = options.get("parse", "") == PARSE_RIDES
        self.dead_bootstrap = options.get("deadLetterBootstrap") or self.bootstrap
        self.dead_topic = options.get("deadLetterTopic", "")
        self.log_dir = options.get("logDir", "")
        self._consumer: Any = None
        self._latest: Offsets | None = None
        self._target: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the driver-side consumer (sockets do not travel)."""
        state = dict(self.__dict__)
        state["_consumer"] = None
        return state

    def _client(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            self._consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None,
                client_id="gesscale-source-planner", **kafka_client_config(),
            )
        return self._consumer

    def _partitions(self) -> list[Any]:
        from kafka import TopicPartition

        ids = self._client().partitions_for_topic(self.topic)
        if not ids:
            raise ValueError(f"topic {self.topic!r} does not exist on {self.bootstrap}")
        return [TopicPartition(self.topic, p) for p in sorted(ids)]

    def _ends(self) -> Offsets:
        return {str(tp.partition): int(o) for tp, o in self._client().end_offsets(self._partitions()).items()}

    def _beginnings(self) -> Offsets:
        return {str(tp.partition): int(o) for tp, o in self._client().beginning_offsets(self._partitions()).items()}

    def initialOffset(self) -> dict:
        """Where a new query starts: the beginning (`earliest`, default) or the end (`latest`) of each partition."""
        return self._ends() if self.starting == "latest" else self._beginnings()

    def getDefaultReadLimit(self) -> ReadLimit:
        """`ReadMaxRows(maxRowsPerBatch)` when the option is set, else everything available."""
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End of the next batch: the broker's end offsets, capped by the read limit (and the AvailableNow target)."""
        start_o = normalise(start)
        latest = self._ends()
        self._latest = latest
        if any(p not in start_o for p in latest):
            begins = self._beginnings()
            start_o = {**{p: begins[p] for p in latest if p not in start_o}, **start_o}
        available = latest
        if self._target is not None:
            available = {p: min(o, self._target.get(p, start_o.get(p, 0))) for p, o in latest.items()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return cap(start_o, available, max_rows)

    def reportLatestOffset(self) -> dict | None:
        """The broker's end offsets seen when the batch was planned (backlog = Σ latest − Σ end)."""
        return self._latest

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end offsets: with `Trigger.AvailableNow` the query stops once it has read up to here."""
        self._target = self._ends()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """One task per partition range of at most `maxRowsPerRange` records (when parsing, each with where its
        bad records go: `_dead_letter_starts`)."""
        start_o, end_o = normalise(start), normalise(end)
        ranges = split(start_o, end_o, self.max_per_range)
        if not self.parse:
            return [KafkaRangePartition(self.bootstrap, self.topic, r, self.poll_timeout_s) for r in ranges]
        starts, replay = self._dead_letter_starts(start_o, end_o)
        n = len(starts)
        return [KafkaRangePartition(self.bootstrap, self.topic, r, self.poll_timeout_s,
                                    DeadLetters(self.dead_bootstrap, self.dead_topic, n, starts[r.partition % n],
                                                replay))
                for r in ranges]

    def _dead_letter_starts(self, start: Offsets, end: Offsets) -> tuple[dict[int, int], bool]:
        """The dead-letter topic's end offsets before the batch [start, end) wrote, and whether it ran before.

        Batches run one after the other, and the driver plans a batch before any of its tasks runs: so the first
        time a batch is planned its offsets are recorded under `logDir`, and a batch planned again (a replay
        after a crash, with identical offsets) finds them there."""
        path = Path(self.log_dir) / DEAD_LETTER_LOG
        digest = hashlib.sha1(json.dumps([start, end], sort_keys=True).encode()).hexdigest()[:20]
        entry = path / digest
        if entry.exists():
            return {int(p): int(o) for p, o in json.loads(entry.read_text()).items()}, True
        from kafka import TopicPartition

        client = self._client() if self.dead_bootstrap == self.bootstrap else None
        if client is None:
            from kafka import KafkaConsumer

            client = KafkaConsumer(bootstrap_servers=self.dead_bootstrap, enable_auto_commit=False, group_id=None,
                                   **kafka_client_config())
        try:
            parts = sorted(client.partitions_for_topic(self.dead_topic) or ())
            if not parts:
                raise ValueError(f"dead-letter topic {self.dead_topic!r} does not exist on {self.dead_bootstrap}")
            ends = {tp.partition: int(o)
                    for tp, o in client.end_offsets([TopicPartition(self.dead_topic, p) for p in parts]).items()}
        finally:
            if client is not self._consumer:
                client.close()
        path.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(".tmp")
        tmp.write_text(json.dumps({str(p): o for p, o in ends.items()}))
        os.replace(tmp, entry)
        old = sorted((e for e in path.iterdir() if e.suffix != ".tmp"), key=lambda e: e.stat().st_mtime)
        for stale in old[:-KEEP_LOG_ENTRIES]:
            stale.unlink(missing_ok=True)
        return ends, False

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: fetch the range (see `read_range`)."""
        assert isinstance(partition, KafkaRangePartition)
        return read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint, not a consumer group, records what has been processed."""

    def stop(self) -> None:
        """Close the planner's consumer."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class KafkaSource(DataSource):
    """The `gesscale_kafka` streaming source: options `bootstrap`, `topic`, `maxRowsPerBatch`,
    `maxRowsPerRange` (default 100000), `startingOffsets` (earliest|latest), `pollTimeoutSeconds` (default 60).
    Rows: partition, offset, key, value (bytes), timestamp_ms. With `parse` = `rides` (and `deadLetterTopic`,
    optionally `deadLetterBootstrap`, and `logDir`, a folder only the driver uses): the good records parsed
    (`jobs.records.RIDES_SCHEMA`), the bad ones sent to the dead-letter topic exactly once."""

    @classmethod
    def name(cls) -> str:
        """Format name used in `readStream.format(...)`."""
        return SOURCE_NAME

    def schema(self) -> str:
        """The raw records (`SCHEMA`), or with option `parse` = `rides` the parsed good ones (`RIDES_SCHEMA`)."""
        if self.options.get("parse", "") == PARSE_RIDES:
            from jobs.records import RIDES_SCHEMA

            return RIDES_SCHEMA
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Validate options and build the reader."""
        required = ["bootstrap", "topic"]
        if self.options.get("parse", "") == PARSE_RIDES:
            required += ["deadLetterTopic", "logDir"]
        for name in required:
            if not self.options.get(name):
                raise ValueError(f"option {name!r} is required")
        return KafkaStreamReader(self.options)
