"""The job on a local Spark session and the session's broker: the Kafka source reading exact offsets under
admission control, the whole job with malformed records (dead letters, every output checked against the
pure-Python reference), and the Parquet sink."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.landmarks import LANDMARKS
from tests.jobs import ridegen
from tests.jobs.reference import check_enriched

pytestmark = pytest.mark.e2e


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
    sent = {json.loads(v)["key"].encode(): json.loads(v) for _, v, ok in ridegen.values(10_000, 100) if ok}
    for key, value in output:
        check_enriched(sent[key], key, value)
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
    assert table.schema.names[:2] == ["key", "value"]  # the query's output, without `partition`
    assert sorted(table.column("key").to_pylist()) == sorted(good)
    names = {json.loads(v)["nearest_landmark"] for v in table.column("value").to_pylist()}
    assert names <= {lm.name for lm in LANDMARKS}
    assert len(ridegen.read_all(kafka_bootstrap, dlq)) == 60


@pytest.mark.parametrize("query_name", ["nearest-landmark", None])
def test_warm_up_runs_the_querys_own_steps_without_writing(spark_local: Any, kafka_bootstrap: str,
                                                           kafka_topic_factory: Any, query_name: str | None) -> None:
    from kafka import KafkaConsumer, TopicPartition

    from jobs.query import load_query
    from jobs.warm import WARM_RECORDS, WarmTarget, warm_range, warm_up

    rides = kafka_topic_factory(partitions=1, prefix="warm-in")
    out = kafka_topic_factory(partitions=1, prefix="warm-out")
    ridegen.produce(kafka_bootstrap, rides, 300, partitions=1)
    query = load_query(query_name) if query_name else None

    def ends(bootstrap: str, topic: str) -> dict[int, int]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        try:
            return {0: int(consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)])}
        finally:
            consumer.close()

    result = warm_up(spark_local, 2, WarmTarget(kafka_bootstrap, rides, kafka_bootstrap, out), ends, query)
    start, until = warm_range(300)
    assert until - start == WARM_RECORDS
    # every task read the last WARM_RECORDS records (ridegen's are all good, so the query keeps every one)
    assert result["tasks"] == 2 and result["rows"] == 2 * WARM_RECORDS
    assert ends(kafka_bootstrap, out) == {0: 0}  # the writer's connection only: nothing written
