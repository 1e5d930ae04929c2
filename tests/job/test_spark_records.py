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
              .option("topic", topic).option("maxRowsPerBatch", "1000").option("maxRowsPerRange", "300").load())
    query = (stream.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    query.awaitTermination(300)
    assert not query.isActive and query.exception() is None
    assert sorted(seen) == sorted((i % 3, i // 3) for i in range(5000))
    assert max(sizes) <= 1000 and sum(sizes) == 5000
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    latest = progress[0]["sources"][0]["latestOffset"]
    latest = json.loads(latest) if isinstance(latest, str) else latest
    assert sum(latest.values()) == 5000  # reportLatestOffset: the broker's end offsets, for the backlog
