"""Warm a just-added executor before the stream's micro-batches reach it.

A new executor's first micro-batch task pays a cold start that a warm one does not: the Python daemon, one
Python worker each for the Kafka source's read, the query's step and the writer's `mapInArrow`, their first
Kafka clients, and the JVM's first pass through this plan (generated code for the projections, Arrow hand-overs).
Inside a fog node's CPU budget this took 10-12 s at half a core and ~43 s at a quarter core (executor logs of
`bench_reconfig.py` and the demo), and the micro-batch it belonged to waited for it.

`warm_up` runs a small batch job shaped like a micro-batch instead: the source's own `read_range` over a few
records the stream has already read (the last ones of the input topic's partition 0), parsed as the source
does, the query's own steps when it is a per-record query (e.g. nearest-landmark), and a `mapInArrow` step that
opens the writer's Kafka connection to the output topic's leader without sending anything (without such a
query: the source's read and one step that runs the enrichment and opens the connection). Nothing is written,
so it cannot touch exactly-once. Its tasks go to every executor; on a warm one they take milliseconds, on the
new one they take the cold start, while the stream keeps to the other executors (`jobs/hook.py` arranges
that). The idle Python workers it leaves behind are reused by the stream's tasks (PySpark's worker reuse).
Before the query's steps were part of it (2026-11-24), the first stream task on a new quarter-core executor
still started a third worker and took 9-11 s instead of ~3 s (demo executor logs).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from jobs.kafka_source import PARSE_RIDES, SCHEMA, KafkaRangePartition, read_range
from jobs.offsets import Range

WARM_SOURCE = "gesscale_warm"
WARM_RECORDS = 200  # records re-read per task: enough for an Arrow batch of the real shape, cheap when warm
COUNTS_SCHEMA = "rows long, good long"
# a good ride in the producer's format (jobs/records.py): the writer's path runs even on an empty topic
SAMPLE = (b'{"key": "warm-0", "ride_id": "warm", "dup": 0, "event_time": "2013-01-01T00:00:00", '
          b'"pickup_lon": -73.98, "pickup_lat": 40.75}')


@dataclass(frozen=True)
class WarmTarget:
    """Where the warm-up reads (the job's input) and which topic's leader it connects to (a topic the writer
    always writes: the dead-letter topic, on the output's Kafka)."""

    bootstrap: str
    input: str
    sink_bootstrap: str
    sink_topic: str


class WarmSource(DataSource):
    """Batch source `gesscale_warm`: `tasks` tasks, each reading offsets [`start`, `until`) of `partition` of
    `topic` with the Kafka source's `read_range`. Rows as the Kafka source's."""

    @classmethod
    def name(cls) -> str:
        """Format name used in `read.format(...)`."""
        return WARM_SOURCE

    def schema(self) -> str:
        """The Kafka source's row layout (with option `parse` = `rides`, the parsed rides')."""
        if self.options.get("parse", "") == PARSE_RIDES:
            from jobs.records import RIDES_SCHEMA

            return RIDES_SCHEMA
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        """The reader of the configured range."""
        return WarmReader(self.options)


class WarmReader(DataSourceReader):
    """Plans `tasks` identical ranges; `read` fetches one on an executor (and with option `parse` = `rides`
    parses it as the job's source does, bad records dropped, not dead-lettered)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = options["bootstrap"]
        self.topic = options["topic"]
        self.range = Range(int(options["partition"]), int(options["start"]), int(options["until"]))
        self.tasks = max(1, int(options.get("tasks", "1")))
        self.parse = options.get("parse", "") == PARSE_RIDES

    def partitions(self) -> list[InputPartition]:
        """One range per task."""
        return [KafkaRangePartition(self.bootstrap, self.topic, self.range, 10.0) for _ in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: the Kafka source's fetch."""
        assert isinstance(partition, KafkaRangePartition)
        if not self.parse:
            return read_range(partition)
        return _parsed(read_range(partition), partition.range.partition)


def _parsed(batches: Iterator[Any], partition: int) -> Iterator[Any]:
    """The fetched records as the parsed rides a query gets (`RIDES_SCHEMA`)."""
    from jobs.records import split_rides

    for batch in batches:
        rides, _ = split_rides(partition, batch.column("offset").to_pylist(), batch.column("value").to_pylist())
        if rides.num_rows:
            yield rides


def _connect_only(batches: Iterator[Any], sink_bootstrap: str, sink_topic: str) -> Iterator[Any]:
    """The writer's step without its writes, after a query: count the query's rows, connect to the output's
    leader."""
    import pyarrow as pa

    from jobs.produce import BatchProducer

    rows = 0
    producer = BatchProducer(sink_bootstrap)
    try:
        producer.connect(sink_topic, 0)
        for batch in batches:
            rows += batch.num_rows
    finally:
        producer.close()
    yield pa.RecordBatch.from_pydict({"rows": [rows], "good": [rows]},
                                     schema=pa.schema([("rows", pa.int64()), ("good", pa.int64())]))


def _sink_side(batches: Iterator[Any], sink_bootstrap: str, sink_topic: str) -> Iterator[Any]:
    """The writer's work without its writes: decode and enrich every record, connect to the output's leader."""
    import pyarrow as pa

    from jobs.produce import BatchProducer
    from jobs.records import BadRecord, enrich

    rows = good = 0
    producer = BatchProducer(sink_bootstrap)
    try:
        producer.connect(sink_topic, 0)
        enrich(SAMPLE)
        for batch in batches:
            for value in batch.column("value").to_pylist():
                rows += 1
                try:
                    enrich(value)
                    good += 1
                except BadRecord:
                    pass
    finally:
        producer.close()
    yield pa.RecordBatch.from_pydict({"rows": [rows], "good": [good]},
                                     schema=pa.schema([("rows", pa.int64()), ("good", pa.int64())]))


def warm_range(end_offset: int, records: int = WARM_RECORDS) -> tuple[int, int]:
    """[start, until) of the last `records` offsets before `end_offset` (empty for an empty partition)."""
    return max(0, end_offset - records), max(0, end_offset)


def warm_up(spark: Any, tasks: int, target: WarmTarget, end_offsets: Any, query: Any = None) -> dict[str, Any]:
    """Run the warm-up job with `tasks` tasks (at least one per executor); its wall time in seconds.

    `end_offsets(bootstrap, topic)` gives `{partition: end offset}` of the input topic (the driver's client).
    With a per-record `query` (`jobs.query.Query`, e.g. nearest-landmark) the job runs that query's own steps
    on the parsed rides before the writer's connection, so the new executor starts as many Python workers as
    a micro-batch task uses (reader, query, writer) and runs the query's code once; otherwise (no query, or one
    that aggregates, whose shuffle a warm-up should not pay) the source's read and the enrichment."""
    tasks = max(1, tasks)
    t0 = time.monotonic()
    start, until = warm_range(int(end_offsets(target.bootstrap, target.input).get(0, 0)))
    spark.dataSource.register(WarmSource)
    reader = (spark.read.format(WARM_SOURCE).option("bootstrap", target.bootstrap).option("topic", target.input)
              .option("partition", "0").option("start", str(start)).option("until", str(until))
              .option("tasks", str(tasks)))
    if query is not None and getattr(query, "per_record", False):
        out = query.build(reader.option("parse", PARSE_RIDES).load())
        body = partial(_connect_only, sink_bootstrap=target.sink_bootstrap, sink_topic=target.sink_topic)
        rows = out.select("key", "value").mapInArrow(body, COUNTS_SCHEMA).collect()
    else:
        df = reader.load().select("partition", "offset", "value")
        body = partial(_sink_side, sink_bootstrap=target.sink_bootstrap, sink_topic=target.sink_topic)
        rows = df.mapInArrow(body, COUNTS_SCHEMA).collect()
    return {"tasks": tasks, "rows": sum(int(r["rows"]) for r in rows), "records": until - start,
            "warm_s": round(time.monotonic() - t0, 3)}
