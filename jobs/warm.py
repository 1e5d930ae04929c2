"""Warm a just-added executor before the stream's micro-batches reach it.

A new executor's first task pays a cold start that a warm one does not: Spark starts the executor's Python
daemon, forks one Python worker for the Kafka source's read and one for the writer's `mapInArrow`, and each
imports the job's modules; the JVM loads the Arrow and Python-runner classes. Inside a fog node's CPU budget
this took 10-12 s at half a core (executor log of `bench_reconfig.py`: reader worker boot+init 2.3 s, writer
worker 6.1 s). When that first task belongs to a micro-batch, the whole batch waits for it: the stream stalls.

`warm_up` runs a small batch job instead, right after the executor registered: a Spark range, then two chained
`mapInArrow` steps (two Python workers in one task, as in a micro-batch) that import the source's and the
writer's modules and enrich one sample record. The idle new executor takes one of its tasks at once and keeps
its only core busy with the cold start while the micro-batches go on running on the warm executors; the idle
Python workers it leaves behind are reused by the stream's tasks (PySpark's worker reuse). The others take
theirs in milliseconds.

It cannot help when the executor registers while a micro-batch still has tasks waiting for a core: Spark hands
the new core to one of them before any warm-up job exists. Then the cold start stalls that batch as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

# a good ride in the producer's format (jobs/records.py), to run the writer's decode-and-enrich path once
SAMPLE = (b'{"key": "warm-0", "ride_id": "warm", "dup": 0, "event_time": "2013-01-01T00:00:00", '
          b'"pickup_lon": -73.98, "pickup_lat": 40.75}')


def _source_side(batches: Iterator[Any]) -> Iterator[Any]:
    """First Python worker: what the Kafka source's read imports on an executor."""
    import jobs.kafka_source  # noqa: F401

    yield from batches


def _sink_side(batches: Iterator[Any]) -> Iterator[Any]:
    """Second Python worker: the writer's modules, and one record through its decode-and-enrich path."""
    import jobs.kafka_sink  # noqa: F401
    from jobs.records import enrich

    enrich(SAMPLE)
    yield from batches


def warm_up(spark: Any, tasks: int) -> dict[str, Any]:
    """Run the warm-up job with `tasks` tasks (at least one per executor); its wall time in seconds."""
    tasks = max(1, tasks)
    t0 = time.monotonic()
    df = spark.range(tasks, numPartitions=tasks)
    rows = df.mapInArrow(_source_side, df.schema).mapInArrow(_sink_side, df.schema).count()
    return {"tasks": tasks, "rows": rows, "warm_s": round(time.monotonic() - t0, 3)}
