"""Sustained throughput of the enrichment job next to the raw read rate of its Kafka source, in one run.

Both run on the same records, the same `local[2]` SparkSession and the same batch size, and each rate is
Σ rows / Σ batch durations over the batches after the first (the first pays for Python worker start-up).
The source alone goes to Spark's `noop` sink; the job parses, enriches and writes exactly once to Kafka.
The ratio job/source is the share of the source's speed the job keeps (target >= 0.8). On a shared machine
the load drifts, so the two are measured in alternating order over several rounds, each round's ratio is
printed, and the median is the result.

The embedded broker (noida-db) re-writes a snapshot of everything it stores, in the background, for a few
seconds after any write: about half a core while writes go on, whatever their size. Two consequences are
handled so that each measurement pays for its own writes and nothing else: before every measurement the
benchmark waits until the broker is idle (otherwise the job's leftover snapshots slowed the next measurement,
which was often the source's), and each round's output topics are deleted after the round (otherwise every
round's job found a larger store than the one before). The broker's CPU seconds during each measurement are
printed next to the rates (with `--variants` also those it spent after the query ended, until idle). With
`--bootstrap` (a broker of unknown process) there is no waiting.

`--variants` adds two measurements to every round, in the same alternating order, to show where the floor is:

- **hand-over floor**: the source's `partition, offset, value` handed to a `mapInArrow` from `foreachBatch`,
  exactly as the job's writer receives them, but the Python body only counts the rows (no parsing, no Kafka
  write). No Python-side sink can go faster than this on the same machine, so its ratio to the source bounds
  what the job can reach with its writer in Python.
- **job, output on a separate broker**: the real job with its output and dead-letter topics on a second embedded
  broker that holds nothing else (`JobConfig.output_bootstrap`); the input stays on the first. It shows what
  the job keeps when the broker's snapshots no longer re-write the 150 000 stored input records after each
  write (a real Kafka appends instead).

For each of the four it also prints the CPU microseconds per row of Spark's own processes (this driver, its
JVM, the Python workers; over the batches after the first, from /proc at the end of each batch), which the
machine's load moves much less than the rates.
The variants are off by default: they start a second broker and double the run time, and the default output
stays comparable, line for line, with the earlier figures in docs/job.md.

`--queries nearest-landmark,frequent-routes` (any `--query` values, docs/queries.md) measures the job once per
query, in the same alternating order, together with the source and the hand-over floor, and prints for each
its records/s per core (the rate over the session's 2 cores) and records per CPU-second of Spark's processes
(1 / its CPU per row), and its ratios to the floor and to the first query. The records are `tests/jobs/ridegen`'s
(one ride per second of trace time; the event time keeps counting past the first day, so that a windowed
query's windows close and none of its rows is late).

    .venv/bin/python benchmarks/bench_job.py [--records 150000] [--rounds 3] [--variants] [--bootstrap HOST:PORT]
        [--queries nearest-landmark,frequent-routes]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.jobs import ridegen  # noqa: E402  (the record generator the tests use)

LABELS = {
    "source": "source alone",
    "floor": "hand-over floor (mapInArrow that only counts)",
    "job": "job",
    "apart": "job, output on a separate empty broker",
}
CORES = 2  # the session's local[2]
TRACE_START = datetime(2013, 5, 1)


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """`ridegen`'s rides 0..n-1 round-robin over the partitions, ride i's event time TRACE_START + i seconds
    (ridegen's own clock wraps after a day, which would make a windowed query drop the second day as late)."""
    import random

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20)
    rnd = random.Random(1)
    for i in range(n):
        rec = ridegen.ride(i, rnd)
        rec["event_time"] = (TRACE_START + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S")
        producer.send(topic, key=rec["ride_id"].encode(), value=json.dumps(rec).encode(), partition=i % partitions)
    producer.flush()
    producer.close()


@dataclass
class Measurement:
    """One query's result: its sustained rate, each broker's CPU during it, and Spark's CPU per row."""

    rate: float  # rows/s over the batches after the first
    broker_cpu: list[float]  # CPU seconds of the input's and the output's embedded broker (0: none watched)
    broker_cpu_after: list[float]  # the same from the query's end until the brokers were idle again
    spark_us_per_row: float  # CPU µs per row of this process and its descendants, brokers excluded, as `rate`


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (Linux /proc)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int, exclude: set[int]) -> float:
    """CPU seconds of `root` and its descendants (live ones, and the reaped children each has waited for),
    leaving out the processes in `exclude` and their descendants."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat(int(entry))
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def wait_idle(pids: list[int], quiet_s: int = 3, timeout_s: float = 120.0) -> None:
    """Wait until each process in `pids` used under 2% of a core in each of `quiet_s` seconds in a row (the
    brokers' snapshots are done; one may start a second or two after the write that causes it)."""
    if not pids:
        return
    deadline = time.monotonic() + timeout_s
    before = [cpu_seconds(p) for p in pids]
    quiet = 0
    while quiet < quiet_s and time.monotonic() < deadline:
        time.sleep(1.0)
        now = [cpu_seconds(p) for p in pids]
        quiet = quiet + 1 if all(n - b < 0.02 for n, b in zip(now, before, strict=True)) else 0
        before = now


def sustained(query: Any) -> tuple[float, int]:
    """(rows/s over the batches after the first, rows counted)."""
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    steady = batches[1:] or batches
    rows = sum(p["numInputRows"] for p in steady)
    ms = sum(p["batchDuration"] for p in steady)
    return (rows / (ms / 1000.0) if ms else 0.0), rows


def count_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """`mapInArrow` body of the hand-over floor: count the rows handed over and yield the count, nothing else."""
    import pyarrow as pa

    rows = 0
    for batch in batches:
        rows += batch.num_rows
    yield pa.RecordBatch.from_pydict({"rows": [rows]}, schema=pa.schema([("rows", pa.int64())]))


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete `topics` on the Kafka at `bootstrap`."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-job")
    try:
        admin.delete_topics(topics)
    finally:
        admin.close()


def main() -> int:
    """Produce, measure the source alone and the job (and with `--variants` the floor and the job writing to a
    separate broker) in alternating order, and print the rates, ratios and medians."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=150_000, help="records produced into the input topic")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of (source, job) measurements, order alternating")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the input topic")
    ap.add_argument("--batch", type=int, default=50_000, help="maxRowsPerBatch for both queries")
    ap.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    ap.add_argument("--variants", action="store_true",
                    help="also measure the hand-over floor and the job writing to a separate, empty embedded broker")
    ap.add_argument("--queries", default="nearest-landmark",
                    help="the job's queries to measure, comma-separated (more than one: the floor is measured too)")
    args = ap.parse_args()
    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    if not queries:
        ap.error("--queries is empty")
    from gesscale.errors import UserError
    from jobs.query import load_query

    try:
        per_record = {q: load_query(q).per_record for q in queries}
    except UserError as err:
        ap.error(str(err))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from gesscale.brokers import start_kafka
    from gesscale.process import free_port
    from jobs.job import JobConfig, JobState, start_query
    from jobs.kafka_io import ensure_topic
    from jobs.kafka_source import KafkaSource

    scratch = Path(tempfile.mkdtemp(prefix="gesscale-bench-job-"))
    brokers: list[Any] = []  # the embedded brokers this run started
    watched: list[int | None] = [None, None]  # process of the input broker and of the output broker, if ours
    spark = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            brokers.append(start_kafka(free_port(19150, 19199), scratch / "kafka"))
            bootstrap, watched[0] = brokers[-1].bootstrap, brokers[-1].process.pid
        out_bootstrap = None
        if args.variants:
            brokers.append(start_kafka(free_port(19150, 19199), scratch / "kafka-out"))
            out_bootstrap, watched[1] = brokers[-1].bootstrap, brokers[-1].process.pid
        topic = f"bench-in-{uuid.uuid4().hex[:8]}"
        ensure_topic(bootstrap, topic, args.partitions)
        t0 = time.monotonic()
        produce(bootstrap, topic, args.records, args.partitions)
        print(f"produced {args.records} records in {time.monotonic() - t0:.1f} s", flush=True)

        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").appName("bench-job").config("spark.ui.port", "14090")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")  # as the job
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaSource)
        pids = [b.process.pid for b in brokers]
        ends: dict[tuple[str, int], tuple[int, float]] = {}  # (query id, batch id) → (rows, Spark CPU s at its end)

        from pyspark.sql.streaming import StreamingQueryListener

        class BatchEnds(StreamingQueryListener):
            """Takes Spark's CPU seconds when each batch ends."""

            def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's API
                return

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                p = event.progress
                ends[(str(p.id), p.batchId)] = (p.numInputRows, tree_cpu_seconds(os.getpid(), set(pids)))

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                return

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                return

        spark.streams.addListener(BatchEnds())

        def steady_cpu_per_row(q: Any) -> float:
            """Spark's CPU µs per row over the batches after the first (those `sustained` counts); NaN when the
            listener did not hear of them within 10 s."""
            wanted = [(str(q.id), p["batchId"]) for p in q.recentProgress if p["numInputRows"] > 0]
            deadline = time.monotonic() + 10.0
            while any(w not in ends for w in wanted) and time.monotonic() < deadline:
                time.sleep(0.05)
            if len(wanted) < 2 or any(w not in ends for w in wanted):
                return float("nan")
            rows = sum(ends[w][0] for w in wanted[1:])
            return (ends[wanted[-1]][1] - ends[wanted[0]][1]) * 1e6 / rows

        def broker_cpu() -> list[float]:
            return [cpu_seconds(p) if p is not None else 0.0 for p in watched]

        def source() -> Any:
            return (spark.readStream.format("gesscale_kafka").option("bootstrap", bootstrap).option("topic", topic)
                    .option("maxRowsPerBatch", str(args.batch)).load())

        def measured(start: Callable[[], Any]) -> Measurement:
            """Wait until the brokers are idle, run the query `start()` starts to its end, and measure it."""
            wait_idle(pids)
            brokers_before = broker_cpu()
            q = start()
            q.awaitTermination()
            at_end = broker_cpu()
            wait_idle(pids)  # the snapshots the query's writes left behind
            return Measurement(sustained(q)[0], [e - b for e, b in zip(at_end, brokers_before, strict=True)],
                               [a - e for a, e in zip(broker_cpu(), at_end, strict=True)], steady_cpu_per_row(q))

        def measure_source(r: int) -> Measurement:
            return measured(lambda: source().writeStream.format("noop").trigger(availableNow=True)
                            .option("checkpointLocation", str(scratch / f"ck-source-{r}")).start())

        def measure_floor(r: int) -> Measurement:
            counted: list[int] = []

            def hand_over(df: Any, batch_id: int) -> None:
                counted.extend(int(row["rows"]) for row in df.mapInArrow(count_rows, "rows long").collect())

            m = measured(lambda: source().select("partition", "offset", "value").writeStream
                            .foreachBatch(hand_over).trigger(availableNow=True)
                            .option("checkpointLocation", str(scratch / f"ck-floor-{r}")).start())
            if sum(counted) != args.records:
                print(f"warning: the floor counted {sum(counted)} rows, not {args.records}", flush=True)
            return m

        def measure_job(r: int, output_bootstrap: str | None = None, query: str = queries[0]) -> Measurement:
            name = "apart" if output_bootstrap else f"q{queries.index(query)}"
            cfg = JobConfig(bootstrap=bootstrap, input=topic, output=f"{topic}-{name}{r}",
                            dead_letter=f"{topic}-{name}-dlq{r}", checkpoint=scratch / f"ck-{name}-{r}",
                            max_rows_per_batch=args.batch, available_now=True, output_bootstrap=output_bootstrap,
                            query=query)
            for t in (cfg.output, cfg.dead_letter_topic):
                ensure_topic(cfg.sink_bootstrap, t, args.partitions)
            state = JobState()
            m = measured(lambda: start_query(spark, cfg, state))
            written = sum(c["written"] for c in state.counts.values())
            done = written + sum(c["dead_letters"] for c in state.counts.values())
            if per_record[query] and done != args.records:
                print(f"warning: {LABELS.get(name, query)} wrote {done} records, not {args.records}", flush=True)
            elif not per_record[query]:
                print(f"  ({query}: {written} output records)", flush=True)
            # the next round's job meets the same store as this one
            delete_topics(cfg.sink_bootstrap, [cfg.output, cfg.dead_letter_topic])
            return m

        measure: dict[str, Callable[[int], Measurement]] = {
            "source": measure_source, "floor": measure_floor, "job": measure_job,
            "apart": lambda r: measure_job(r, out_bootstrap)}
        if len(queries) > 1 or queries != ["nearest-landmark"]:
            return by_query(args, queries, measure, measure_job)
        names = ["source", "floor", "job", "apart"] if args.variants else ["source", "job"]
        extra = [n for n in names if n not in ("source", "job")]
        ratios: dict[str, list[float]] = {n: [] for n in names if n != "source"}
        for r in range(args.rounds):
            got = {n: measure[n](r) for n in (names if r % 2 == 0 else names[::-1])}
            src, job = got["source"], got["job"]
            for n in ratios:
                ratios[n].append(got[n].rate / src.rate)
            print(f"round {r + 1}: source alone {src.rate:,.0f} rows/s, job (parse, enrich, exactly-once Kafka "
                  f"write) {job.rate:,.0f} rows/s, ratio {ratios['job'][-1]:.2f}; broker CPU during the source "
                  f"{src.broker_cpu[0]:.1f} s, during the job {job.broker_cpu[0]:.1f} s; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            if args.variants:
                for n in extra:
                    print(f"  {LABELS[n]}: {got[n].rate:,.0f} rows/s, ratio {ratios[n][-1]:.2f}", flush=True)
                print("  broker CPU s during (+ after, until idle), input broker / output broker: " + ", ".join(
                    f"{LABELS[n]} {got[n].broker_cpu[0]:.1f} (+{got[n].broker_cpu_after[0]:.1f}) / "
                    f"{got[n].broker_cpu[1]:.1f} (+{got[n].broker_cpu_after[1]:.1f})" for n in names))
                print("  Spark's CPU µs per row (driver, JVM, Python workers; batches after the first): " + ", ".join(
                    f"{LABELS[n]} {got[n].spark_us_per_row:.1f}" for n in names), flush=True)
        print(f"ratio job/source, median of {len(ratios['job'])} rounds: {statistics.median(ratios['job']):.2f} "
              f"(target >= 0.8)")
        for n in extra:
            print(f"ratio {LABELS[n]}/source, median of {len(ratios[n])} rounds: {statistics.median(ratios[n]):.2f}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        for broker in brokers:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def by_query(args: Any, queries: list[str], measure: dict[str, Callable[[int], Measurement]],
             measure_job: Callable[..., Measurement]) -> int:
    """`--queries`: the source, the floor and the job once per query each round, in alternating order; per round
    and as medians, each one's records/s per core and records per Spark CPU-second, and the ratios."""
    for i, q in enumerate(queries):
        LABELS[f"q{i}"] = f"job {q}"
        measure[f"q{i}"] = lambda r, q=q: measure_job(r, query=q)
    names = ["source", "floor", *[f"q{i}" for i in range(len(queries))]]
    got_all: dict[str, list[Measurement]] = {n: [] for n in names}
    for r in range(args.rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            got_all[n].append(measure[n](r))
        print(f"round {r + 1} (load {os.getloadavg()[0]:.1f}): " + "; ".join(
            f"{LABELS[n]} {got_all[n][-1].rate:,.0f} rows/s = {got_all[n][-1].rate / CORES:,.0f} per core, "
            f"{1e6 / got_all[n][-1].spark_us_per_row:,.0f} per Spark CPU-s" for n in names), flush=True)
    med = {n: statistics.median(m.rate for m in got_all[n]) for n in names}
    per_cpu = {n: statistics.median(1e6 / m.spark_us_per_row for m in got_all[n]) for n in names}
    print(f"\nmedians of {args.rounds} rounds ({CORES} cores, {args.records} records, {args.batch}-row batches):")
    print(f"{'':<48} {'rows/s':>9} {'per core':>9} {'per CPU-s':>9} {'/floor':>7} {'/first':>7} {'/source':>7}")
    for n in names:
        first = f"q{0}"
        print(f"{LABELS[n]:<48} {med[n]:>9,.0f} {med[n] / CORES:>9,.0f} {per_cpu[n]:>9,.0f} "
              f"{med[n] / med['floor']:>7.2f} {med[n] / med[first]:>7.2f} {med[n] / med['source']:>7.2f}")
    for i, q in enumerate(queries[1:], start=1):
        ratios = [a.rate / b.rate for a, b in zip(got_all[f"q{i}"], got_all["q0"], strict=True)]
        print(f"{q} / {queries[0]} per round: {' / '.join(f'{x:.2f}' for x in ratios)}; median "
              f"{statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
