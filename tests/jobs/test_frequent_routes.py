"""`frequent-routes` (DEBS 2015 Query 1) against the plain-Python reference of tests/jobs/routes_reference.py:
the reference's own rules, then the Spark query on the real DEBS sample and on a generated trace, window for
window, route for route, rank for rank."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from producer.records import Ride, record_dict
from producer.source import file_source
from producer.synthetic import synthetic_rides
from tests.jobs import ridegen
from tests.jobs.routes_reference import cell, epoch_s, iso, top_routes, window_ends

SAMPLE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "debs2015-sample-3000.csv"


def test_cells_are_numbered_from_the_first_cells_centre_east_then_south() -> None:
    lat0, lon0 = 41.474937, -74.913585
    assert cell(lon0, lat0) == (1, 1)
    assert cell(lon0 + 0.005986, lat0) == (2, 1)  # 500 m east
    assert cell(lon0, lat0 - 0.004491556) == (1, 2)  # 500 m south
    assert cell(lon0 + 299 * 0.005986, lat0 - 299 * 0.004491556) == (300, 300)
    assert cell(lon0 + 300 * 0.005986, lat0) is None and cell(lon0, lat0 + 0.004491556) is None
    assert cell(-73.985, 40.758) == (156, 161)  # Times Square: 155.6 cells east and 160.1 south of the corner
    assert cell(None, 40.7) is None


def test_a_ride_falls_in_the_six_windows_whose_span_holds_its_time() -> None:
    t = epoch_s("2013-01-01T00:07:00")
    assert [iso(e) for e in window_ends(t, 1800, 300)] == [
        "2013-01-01T00:10:00", "2013-01-01T00:15:00", "2013-01-01T00:20:00", "2013-01-01T00:25:00",
        "2013-01-01T00:30:00", "2013-01-01T00:35:00"]
    assert iso(window_ends(epoch_s("2013-01-01T00:10:00"), 1800, 300)[0]) == "2013-01-01T00:15:00"  # end excluded


def ride(minute: int, start: tuple[float, float], end: tuple[float, float], key: str) -> dict:
    return {"key": key, "event_time": iso(epoch_s("2013-01-01T00:00:00") + 60 * minute), "pickup_lon": start[0],
            "pickup_lat": start[1], "dropoff_lon": end[0], "dropoff_lat": end[1]}


def test_reference_ranks_by_count_then_freshness_and_keeps_closed_windows_only() -> None:
    a, b, c, out = (-73.99, 40.75), (-73.97, 40.76), (-73.95, 40.78), (0.0, 0.0)
    recs = [ride(1, a, b, "1"), ride(2, a, b, "2"), ride(3, b, c, "3"), ride(4, c, a, "4"), ride(4, a, out, "5"),
            ride(50, out, out, "late")]  # outside the grid: ignored, but its time closes the windows up to 00:45
    got = top_routes(recs)
    ends = [iso(epoch_s("2013-01-01T00:00:00") + 60 * m) for m in (5, 10, 15, 20, 25, 30)]
    assert sorted(got) == ends
    first = got["2013-01-01T00:05:00"]
    assert [(r["start_cell"], r["end_cell"], r["count"]) for r in first] == [
        (f"{cell(*a)[0]}.{cell(*a)[1]}", f"{cell(*b)[0]}.{cell(*b)[1]}", 2),
        (f"{cell(*c)[0]}.{cell(*c)[1]}", f"{cell(*a)[0]}.{cell(*a)[1]}", 1),  # 00:04 beats 00:03
        (f"{cell(*b)[0]}.{cell(*b)[1]}", f"{cell(*c)[0]}.{cell(*c)[1]}", 1)]
    assert [r["rank"] for r in first] == [1, 2, 3]
    assert sorted(top_routes([*recs[:-1], ride(34, out, out, "x")])) == ends[:-1]  # 00:30 > 00:34 - 5 min: open
    assert sorted(top_routes([*recs[:-1], ride(35, out, out, "x")])) == ends  # closes when the watermark reaches it


def sample_records() -> list[dict]:
    return [record_dict(r, 0) for r in file_source(SAMPLE)]


def generated_records(rides_per_day: int, hours: float, seed: int) -> list[dict]:
    return [record_dict(r, 0) for r in synthetic_rides(days=hours / 24, rides_per_day=rides_per_day, seed=seed)]


def sentinel(after: dict, minutes: int) -> dict:
    """A ride outside the grid `minutes` after `after`: it moves the watermark on and closes the windows."""
    when = datetime.fromisoformat(after["event_time"]) + timedelta(minutes=minutes)
    return record_dict(Ride("sentinel", "m", when, when, 0, 0.0, 0.0, 0.0, 0.0, 0.0), 0)


def produce_records(bootstrap: str, topic: str, recs: Iterable[dict], partitions: int) -> int:
    """Send the records in order, round-robin over the partitions; returns how many."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20)
    n = 0
    for i, rec in enumerate(recs):
        producer.send(topic, key=rec["ride_id"].encode(), value=json.dumps(rec).encode(), partition=i % partitions)
        n += 1
    producer.flush()
    producer.close()
    return n


def windows_written(bootstrap: str, topic: str) -> dict[str, list[dict]]:
    """{key: routes} of the output topic; fails on a key written twice."""
    out: dict[str, list[dict]] = {}
    for key, value in ridegen.read_all(bootstrap, topic):
        assert key.decode() not in out, f"window {key!r} written twice"
        body = json.loads(value)
        assert body["window_end"] == key.decode()
        assert epoch_s(body["window_end"]) - epoch_s(body["window_start"]) == 1800
        out[key.decode()] = body["routes"]
    return out


def run_routes_query(spark: Any, bootstrap: str, topics: Any, recs: list[dict], tmp: Path,
                     batch: int) -> tuple[dict[str, list[dict]], list[dict]]:
    """Produce `recs`, run the job's query once over them (available-now) and return (windows, progress)."""
    from jobs.job import JobConfig, JobState, start_query

    inp, out, dlq = (topics(partitions=2, prefix=p) for p in ("in", "out", "dlq"))
    produce_records(bootstrap, inp, recs, 2)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    cfg = JobConfig(bootstrap=bootstrap, input=inp, output=out, dead_letter=dlq, checkpoint=tmp / "ck",
                    available_now=True, max_rows_per_batch=batch, query="frequent-routes")
    query = start_query(spark, cfg, JobState())
    query.awaitTermination(900)
    assert not query.isActive and query.exception() is None
    assert ridegen.read_all(bootstrap, dlq) == []
    return windows_written(bootstrap, out), list(query.recentProgress)


def assert_matches_reference(got: dict[str, list[dict]], recs: list[dict], progress: list[dict]) -> None:
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", []))
    assert dropped == 0, "late rows: the reference does not model them"
    want = top_routes(recs)
    assert sorted(got) == sorted(want)
    for end, routes in want.items():
        assert got[end] == routes, end


@pytest.mark.e2e
def test_spark_matches_the_reference_on_the_debs_sample_and_a_generated_trace(
        spark_local: Any, kafka_bootstrap: str, kafka_topic_factory: Any, tmp_path: Path) -> None:
    recs = sample_records()
    assert len(recs) > 2500
    recs.append(sentinel(recs[-1], 60))
    got, progress = run_routes_query(spark_local, kafka_bootstrap, kafka_topic_factory, recs, tmp_path / "a", 1000)
    assert len(got) >= 6 and max(len(r) for r in got.values()) == 10
    assert_matches_reference(got, recs, progress)

    # ~20 000 rides over six hours, no sentinel: the last windows stay open and must not appear
    recs = generated_records(80_000, 6, seed=7)
    got, progress = run_routes_query(spark_local, kafka_bootstrap, kafka_topic_factory, recs, tmp_path / "b", 4000)
    assert len(got) >= 60 and all(len(r) == 10 for r in got.values())
    assert_matches_reference(got, recs, progress)

