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

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from jobs.offsets import Offsets, Range, cap, normalise, split

SOURCE_NAME = "gesscale_kafka"
SCHEMA = "partition int, offset long, key binary, value binary, timestamp_ms long"
ARROW_ROWS = 8192  # rows per Arrow batch handed to Spark


class KafkaRangePartition(InputPartition):
    """One task's work: offsets [start, until) of one partition, with what an executor needs to fetch them."""

    def __init__(self, bootstrap: str, topic: str, rng: Range, poll_timeout_s: float) -> None:
        super().__init__((rng.partition, rng.start, rng.until))
        self.bootstrap = bootstrap
        self.topic = topic
        self.range = rng
        self.poll_timeout_s = poll_timeout_s


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


def read_range(part: KafkaRangePartition) -> Iterator[Any]:
    """Fetch exactly the offsets of `part` with kafka-python and yield them as Arrow record batches.

    Records outside [start, until) (a fetch returns whole broker batches) are dropped; offsets missing inside
    the range (compaction, transaction markers) are skipped by watching the consumer position. If the broker
    returns nothing for `poll_timeout_s` the task fails, so Spark retries it instead of producing a short batch.
    """
    import pyarrow as pa
    from kafka import KafkaConsumer, TopicPartition

    rng = part.range
    schema = pa.schema(
        [("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
         ("timestamp_ms", pa.int64())]
    )
    fetch_bytes = fetch_size(rng)
    consumer = KafkaConsumer(
        bootstrap_servers=part.bootstrap,
        enable_auto_commit=False,
        group_id=None,
        check_crcs=False,
        max_partition_fetch_bytes=fetch_bytes,
        fetch_max_bytes=fetch_bytes,
        client_id="gesscale-source",
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
            # (noida-db ignores the fetch size), and the client would decode all of it (tests/job/test_read_range)
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
                yield pa.RecordBatch.from_arrays(
                    [pa.array([rng.partition] * len(offs), pa.int32()), pa.array(offs, pa.int64()),
                     pa.array(keys, pa.binary()), pa.array(vals, pa.binary()), pa.array(stamps, pa.int64())],
                    schema=schema,
                )
                offs, keys, vals, stamps = [], [], [], []
    finally:
        consumer.close()


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
                client_id="gesscale-source-planner",
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
        """One task per partition range of at most `maxRowsPerRange` records."""
        return [
            KafkaRangePartition(self.bootstrap, self.topic, r, self.poll_timeout_s)
            for r in split(normalise(start), normalise(end), self.max_per_range)
        ]

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
    Rows: partition, offset, key, value (bytes), timestamp_ms."""

    @classmethod
    def name(cls) -> str:
        """Format name used in `readStream.format(...)`."""
        return SOURCE_NAME

    def schema(self) -> str:
        """Fixed row layout; the job parses `value`."""
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Validate options and build the reader."""
        for required in ("bootstrap", "topic"):
            if not self.options.get(required):
                raise ValueError(f"option {required!r} is required")
        return KafkaStreamReader(self.options)
