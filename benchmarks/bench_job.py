"""Sustained throughput of the enrichment job next to the raw read rate of its Kafka source, in one run.

Both run on the same records, the same `local[2]` SparkSession and the same batch size, and each rate is
Σ rows / Σ batch durations over the batches after the first (the first pays for Python worker start-up).
The source alone goes to Spark's `noop` sink; the job parses, enriches and writes exactly once to Kafka.
The ratio job/source is the share of the source's speed the job keeps (target >= 0.8). On a shared machine
the load drifts, so the two are measured in alternating order over several rounds, each round's ratio is
printed, and the median is the result.

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

        def measure_source(r: int) -> float:
            raw = (spark.readStream.format("gesscale_kafka").option("bootstrap", bootstrap).option("topic", topic)
                   .option("maxRowsPerBatch", str(args.batch)).load())
            q = (raw.writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", str(scratch / f"ck-source-{r}")).start())
            q.awaitTermination()
            return sustained(q)[0]

        def measure_job(r: int) -> float:
            cfg = JobConfig(bootstrap=bootstrap, input=topic, output=f"{topic}-out{r}", dead_letter=f"{topic}-dlq{r}",
                            checkpoint=scratch / f"ck-job-{r}", max_rows_per_batch=args.batch, available_now=True)
            for t in (cfg.output, cfg.dead_letter_topic):
                ensure_topic(bootstrap, t, args.partitions)
            q = start_query(spark, cfg, JobState())
            q.awaitTermination()
            return sustained(q)[0]

        ratios = []
        for r in range(args.rounds):
            if r % 2 == 0:
                source_rate, job_rate = measure_source(r), measure_job(r)
            else:
                job_rate, source_rate = measure_job(r), measure_source(r)
            ratios.append(job_rate / source_rate)
            print(f"round {r + 1}: source alone {source_rate:,.0f} rows/s, job (parse, enrich, exactly-once Kafka "
                  f"write) {job_rate:,.0f} rows/s, ratio {ratios[-1]:.2f}", flush=True)
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
