"""The job's Spark logic on a local session: enrichment against a pure-Python reference, reasons for bad
records, and the Kafka source reading exact offsets under admission control."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from jobs.landmarks import LANDMARKS
from jobs.records import classify
from tests.job import ridegen

pytestmark = pytest.mark.e2e


def reference_nearest(lon: float, lat: float) -> tuple[str, float]:
    """Pure-Python reference: the landmark with the smallest Euclidean distance in degrees (first wins a tie)."""
    best_name, best_d = "", math.inf
    for lm in LANDMARKS:
        d = math.sqrt((lon - lm.lon) ** 2 + (lat - lm.lat) ** 2)
        if d < best_d:
            best_name, best_d = lm.name, d
    return best_name, best_d


def frame(spark: Any, values: list[bytes], topic_partitions: int = 2) -> Any:
    rows = [(i % topic_partitions, i, None, v, 0) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "partition int, offset long, key binary, value binary, timestamp_ms long")


def test_enrichment_of_10000_records_equals_the_reference(spark_local: Any) -> None:
    records = [json.loads(v) for _, v, _ in ridegen.values(10_000, seed=7)]
    # include the landmarks themselves: distance 0 and the right name
    for j, lm in enumerate(LANDMARKS):
        records[j]["pickup_lon"], records[j]["pickup_lat"] = lm.lon, lm.lat
    out = classify(frame(spark_local, [json.dumps(r).encode() for r in records]), "rides")
    got = {r["key"]: r for r in out.select("key", "reason", "enriched.*").collect()}
    assert len(got) == 10_000
    names = set()
    for rec in records:
        row = got[rec["key"]]
        assert row["reason"] is None
        name, dist = reference_nearest(rec["pickup_lon"], rec["pickup_lat"])
        assert row["nearest_landmark"] == name, rec
        assert abs(row["landmark_distance"] - dist) <= 1e-9
        assert row["ride_id"] == rec["ride_id"] and row["pickup_lat"] == rec["pickup_lat"]
        names.add(name)
    assert names == {lm.name for lm in LANDMARKS}
    assert got[records[0]["key"]]["landmark_distance"] == 0.0


def test_bad_records_carry_a_reason(spark_local: Any) -> None:
    expected = [
        "not a JSON object", "not a JSON object", "not a JSON object", "missing field key", "not a JSON object",
        "event_time", "longitude/latitude",
    ]
    out = classify(frame(spark_local, list(ridegen.MALFORMED)), "rides").orderBy("offset").collect()
    assert len(out) == len(expected)
    for row, want in zip(out, expected, strict=True):
        assert row["reason"] is not None and want in row["reason"], (row, want)
        assert row["key"] == f"rides/{row['partition']}/{row['offset']}"
        assert row["enriched"] is None and row["dead"]["raw"] is not None


def test_source_reads_exact_offsets_within_the_batch_limit(spark_local: Any, kafka_bootstrap: str,
                                                           kafka_topic_factory: Any, tmp_path: Any) -> None:
    topic = kafka_topic_factory(partitions=3, prefix="src")
    ridegen.produce(kafka_bootstrap, topic, 5000, partitions=3)
    seen: list[tuple[int, int]] = []
    sizes: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = df.select("partition", "offset").collect()
        sizes.append(len(rows))
        seen.extend((r["partition"], r["offset"]) for r in rows)

    stream = (spark_local.readStream.format("gesscale_kafka").option("bootstrap", kafka_bootstrap)
              .option("topic", topic).option("maxRowsPerBatch", "2000").option("maxRowsPerRange", "300").load())
    query = (stream.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    query.awaitTermination(300)
    assert not query.isActive and query.exception() is None
    assert sorted(seen) == sorted((i % 3, i // 3) for i in range(5000))
    assert max(sizes) <= 2000 and len(sizes) == 3 and sum(sizes) == 5000
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    latest = progress[0]["sources"][0]["latestOffset"]
    latest = json.loads(latest) if isinstance(latest, str) else latest
    assert sum(latest.values()) == 5000  # reportLatestOffset: the broker's end offsets, for the backlog


def run_job_in_session(spark: Any, cfg: Any) -> None:
    from jobs.job import JobState, start_query

    query = start_query(spark, cfg, JobState())
    query.awaitTermination(600)
    assert not query.isActive and query.exception() is None


def test_malformed_records_go_to_the_dead_letter_topic_and_the_rest_is_processed(
        spark_local: Any, kafka_bootstrap: str, kafka_topic_factory: Any, tmp_path: Any) -> None:
    from jobs.job import JobConfig

    inp, out, dlq = (kafka_topic_factory(partitions=2, prefix=p) for p in ("in", "out", "dlq"))
    good = ridegen.produce(kafka_bootstrap, inp, 10_000, partitions=2, malformed_every=100)
    assert len(good) == 9_900
    run_job_in_session(spark_local, JobConfig(bootstrap=kafka_bootstrap, input=inp, output=out, dead_letter=dlq,
                                              checkpoint=tmp_path / "ck", available_now=True))
    output = ridegen.read_all(kafka_bootstrap, out)
    assert sorted(k for k, _ in output) == sorted(good)
    sample = json.loads(output[0][1])
    assert sample["nearest_landmark"] and sample["landmark_distance"] >= 0
    dead = ridegen.read_all(kafka_bootstrap, dlq)
    assert len(dead) == 100 and len({k for k, _ in dead}) == 100
    for key, value in dead:
        body = json.loads(value)
        assert body["reason"] and body["raw"] and body["topic"] == inp
        assert key.decode() == f"{inp}/{body['partition']}/{body['offset']}"


def test_parquet_sink_writes_the_enriched_rows(spark_local: Any, kafka_bootstrap: str, kafka_topic_factory: Any,
                                               tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    from jobs.job import JobConfig

    inp, dlq = (kafka_topic_factory(partitions=2, prefix=p) for p in ("in", "dlq"))
    good = ridegen.produce(kafka_bootstrap, inp, 3_000, partitions=2, malformed_every=50)
    out = tmp_path / "enriched"
    run_job_in_session(spark_local, JobConfig(bootstrap=kafka_bootstrap, input=inp, output=str(out), dead_letter=dlq,
                                              checkpoint=tmp_path / "ck", sink="parquet", available_now=True,
                                              max_rows_per_batch=1_000))
    table = pq.read_table(out)
    assert sorted(k.encode() for k in table.column("key").to_pylist()) == sorted(good)
    assert set(table.column("nearest_landmark").to_pylist()) <= {lm.name for lm in LANDMARKS}
    assert len(ridegen.read_all(kafka_bootstrap, dlq)) == 60
