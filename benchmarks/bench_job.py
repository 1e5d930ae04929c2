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
printed next to the rates. With `--bootstrap` (a broker of unknown process) there is no waiting.

    .venv/bin/python benchmarks/bench_job.py [--records 150000] [--rounds 3] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.job import ridegen  # noqa: E402  (the record generator the tests use)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, quiet_s: int = 3, timeout_s: float = 120.0) -> None:
    """Wait until process `pid` used under 2% of a core in each of `quiet_s` seconds in a row (the broker's
    snapshots are done; one may start a second or two after the write that causes it)."""
    deadline = time.monotonic() + timeout_s
    before = cpu_seconds(pid)
    quiet = 0
    while quiet < quiet_s and time.monotonic() < deadline:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        quiet = quiet + 1 if now - before < 0.02 else 0
        before = now


def sustained(query) -> tuple[float, int]:  # noqa: ANN001
    """(rows/s over the batches after the first, rows counted)."""
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    steady = batches[1:] or batches
    rows = sum(p["numInputRows"] for p in steady)
    ms = sum(p["batchDuration"] for p in steady)
    return (rows / (ms / 1000.0) if ms else 0.0), rows


def main() -> int:
    """Produce, measure the source alone, then the job, and print both rates and their ratio."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=150_000, help="records produced into the input topic")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of (source, job) measurements, order alternating")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the input topic")
    ap.add_argument("--batch", type=int, default=50_000, help="maxRowsPerBatch for both queries")
    ap.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from kafka.admin import KafkaAdminClient

    from gesscale.brokers import start_kafka
    from gesscale.brokers.process import free_port
    from jobs.job import JobConfig, JobState, start_query
    from jobs.kafka_io import ensure_topic
    from jobs.kafka_source import KafkaSource

    scratch = Path(tempfile.mkdtemp(prefix="gesscale-bench-job-"))
    broker = None
    spark = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            broker = start_kafka(free_port(19150, 19199), scratch / "kafka")
            bootstrap = broker.bootstrap
        topic = f"bench-in-{uuid.uuid4().hex[:8]}"
        ensure_topic(bootstrap, topic, args.partitions)
        t0 = time.monotonic()
        ridegen.produce(bootstrap, topic, args.records, args.partitions)
        print(f"produced {args.records} records in {time.monotonic() - t0:.1f} s", flush=True)

        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").appName("bench-job").config("spark.ui.port", "14090")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaSource)

        def quiet() -> float:
            """Broker CPU seconds so far, after waiting until it is idle (0 for an external broker)."""
            if broker is None:
                return 0.0
            wait_idle(broker.process.pid)
            return cpu_seconds(broker.process.pid)

        def broker_used(start: float) -> float:
            return cpu_seconds(broker.process.pid) - start if broker is not None else 0.0

        def measure_source(r: int) -> tuple[float, float]:
            start = quiet()
            raw = (spark.readStream.format("gesscale_kafka").option("bootstrap", bootstrap).option("topic", topic)
                   .option("maxRowsPerBatch", str(args.batch)).load())
            q = (raw.writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", str(scratch / f"ck-source-{r}")).start())
            q.awaitTermination()
            return sustained(q)[0], broker_used(start)

        def measure_job(r: int) -> tuple[float, float]:
            cfg = JobConfig(bootstrap=bootstrap, input=topic, output=f"{topic}-out{r}", dead_letter=f"{topic}-dlq{r}",
                            checkpoint=scratch / f"ck-job-{r}", max_rows_per_batch=args.batch, available_now=True)
            for t in (cfg.output, cfg.dead_letter_topic):
                ensure_topic(bootstrap, t, args.partitions)
            start = quiet()
            q = start_query(spark, cfg, JobState())
            q.awaitTermination()
            result = sustained(q)[0], broker_used(start)
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-job")
            try:  # the next round's job meets the same store as this one
                admin.delete_topics([cfg.output, cfg.dead_letter_topic])
            finally:
                admin.close()
            return result

        ratios = []
        for r in range(args.rounds):
            if r % 2 == 0:
                (source_rate, source_cpu), (job_rate, job_cpu) = measure_source(r), measure_job(r)
            else:
                (job_rate, job_cpu), (source_rate, source_cpu) = measure_job(r), measure_source(r)
            ratios.append(job_rate / source_rate)
            print(f"round {r + 1}: source alone {source_rate:,.0f} rows/s, job (parse, enrich, exactly-once Kafka "
                  f"write) {job_rate:,.0f} rows/s, ratio {ratios[-1]:.2f}; broker CPU during the source "
                  f"{source_cpu:.1f} s, during the job {job_cpu:.1f} s; load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"ratio job/source, median of {len(ratios)} rounds: {statistics.median(ratios):.2f} (target >= 0.8)")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
