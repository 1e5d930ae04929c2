"""gesscale/testbed/latency.py: record latencies from broker append times, by hand on a real broker, and the
pieces (batch of a record, its nodes, the physical floor) on hand-made batches."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from gesscale.batch_record import BatchRecord, Executor
from gesscale.brokers.topics import ensure_topic
from gesscale.testbed.keys import BatchRange, batch_ranges
from gesscale.testbed.latency import (
    BATCH_COMMIT,
    LOG_APPEND_TIME,
    OUTPUT_APPEND,
    batch_times_and_nodes,
    floor_violations,
    locate,
    read_records_csv,
    record_latencies,
    report,
)


def _batch(bid: int, t: float, start: dict, end: dict, hosts: tuple[str, ...] = ("127.0.0.31",)) -> BatchRecord:
    return BatchRecord(time=t, batch_id=bid, num_input_rows=1, batch_duration_ms=100,
                       executors=tuple(Executor(str(i), h) for i, h in enumerate(hosts)),
                       start_offsets={str(p): o for p, o in start.items()},
                       end_offsets={str(p): o for p, o in end.items()})


def test_each_record_is_located_in_the_batch_whose_range_holds_it() -> None:
    ranges = [BatchRange(0, {}, {0: 3, 1: 1}), BatchRange(1, {0: 3, 1: 1}, {0: 5, 1: 1})]
    part = np.array([0, 0, 0, 1, 1, 0])
    off = np.array([0, 2, 3, 0, 1, 5])
    # partition 0: offsets 0-2 in batch 0, 3-4 in batch 1, 5 in none; partition 1: offset 0 in batch 0, 1 in none
    assert list(locate(part, off, ranges)) == [0, 0, 1, 0, -1, -1]


def test_a_batch_recorded_twice_keeps_its_last_commit_and_its_nodes() -> None:
    obs = [_batch(0, 10.0, {}, {0: 1}, ("127.0.0.31",)), _batch(0, 12.0, {}, {0: 1}, ("127.0.0.32", "127.0.0.31"))]
    times, nodes = batch_times_and_nodes(obs, {"127.0.0.31": "fog1", "127.0.0.32": "fog2"}.get)
    assert times == {0: 12.0} and nodes == {0: ["fog1", "fog2"]}


def test_the_floor_is_the_nearest_node_of_the_batch_within_a_millisecond() -> None:
    rtt = {"fog1": 10.0, "fog2": 30.0}.get
    rows = [{"latency_ms": 12, "nodes": "fog1+fog2"},  # above fog1's 10 ms: ok although below fog2's
            {"latency_ms": 9, "nodes": "fog1"},  # 10 ms RTT, stamped 9 ms: within the stamps' 1 ms
            {"latency_ms": 8, "nodes": "fog1"},  # below
            {"latency_ms": None, "nodes": "fog1"}]  # not processed: no latency to judge
    assert floor_violations(rows, rtt) == [rows[2]]


def _send(bootstrap: str, topic: str, items: list[tuple[bytes, bytes, int]]) -> list:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        acks = [producer.send(topic, key=k, value=v, partition=p) for k, v, p in items]
        producer.flush(10)
        return [a.get(10) for a in acks]
    finally:
        producer.close()


def _ride(key: str) -> bytes:
    return json.dumps({"key": key, "ride_id": key.split("-")[0]}).encode()


def test_latencies_from_append_times_per_record_and_per_batch(kafka_bootstrap: str, tmp_path: Path) -> None:
    tag = f"lat{time.monotonic_ns()}"
    topics = {role: f"{tag}-{role}" for role in ("in", "out", "dead")}
    for t in topics.values():
        ensure_topic(kafka_bootstrap, t, 2, LOG_APPEND_TIME)
    warm = _send(kafka_bootstrap, topics["in"], [(b"w", _ride("warmup0-0"), 0)])
    time.sleep(0.05)
    since_ms = int(time.time() * 1000)
    ins = _send(kafka_bootstrap, topics["in"], [(b"a", _ride("a-0"), 0), (b"b", _ride("b-0"), 1),
                                                (b"c", b"not json", 1), (b"d", _ride("d-0"), 0)])
    time.sleep(0.2)
    outs = _send(kafka_bootstrap, topics["out"], [(b"a-0", b"A", 0), (b"b-0", b"B", 1), (b"warmup0-0", b"W", 0)])
    time.sleep(0.1)
    dead = _send(kafka_bootstrap, topics["dead"], [(f"{topics['in']}/1/1".encode(), b"{}", 1)])
    # d-0 (partition 0, offset 2) has no output: not processed. Batches: 0 read the warm-up record, 1 the rest
    # but d-0, which no committed batch read.
    obs = [_batch(0, 1.0, {}, {0: 1}), _batch(1, since_ms / 1000 + 0.5, {0: 1}, {0: 2, 1: 2}, ("127.0.0.32",))]
    nodes = {"127.0.0.31": "fog1", "127.0.0.32": "fog2"}.get
    rec = record_latencies(kafka_bootstrap, topics["in"], topics["out"], topics["dead"], per_record=True,
                           observations=obs, ranges=batch_ranges(tmp_path, obs), since_ms=since_ms, node_at=nodes)
    assert rec.basis == OUTPUT_APPEND and rec.excluded == 1 and warm[0].timestamp < since_ms
    assert rec.stamps == {"input": ["LogAppendTime"], "output": ["LogAppendTime"], "dead_letter": ["LogAppendTime"]}
    got = dict(zip(rec.keys, rec.latencies_s, strict=True))
    want = {"a-0": (outs[0].timestamp - ins[0].timestamp) / 1000, "b-0": (outs[1].timestamp - ins[1].timestamp) / 1000,
            f"{topics['in']}/1/1": (dead[0].timestamp - ins[2].timestamp) / 1000}
    assert {k: v for k, v in got.items() if k != "d-0"} == want
    assert all(v >= 0.2 for v in want.values()) and math.isinf(got["d-0"])
    run, periods = report(rec, [since_ms / 1000 + 0.01, since_ms / 1000 + 60])
    assert run["records"] == 4 and run["processed"] == 3 and run["unprocessed"] == 1 and run["max_s"] is None
    assert run["broker_append_times"] and run["excluded_before_day"] == 1
    assert sum(p["records"] for p in periods) == 4
    rows = {r["key"]: r for r in read_records_csv(rec.write_csv(tmp_path / "lat.csv.gz"))}
    assert {k: (r["batch_id"], r["nodes"]) for k, r in rows.items()} == \
        {"a-0": (1, "fog2"), "b-0": (1, "fog2"), f"{topics['in']}/1/1": (1, "fog2"), "d-0": (-1, "")}
    assert rows["a-0"]["latency_ms"] == outs[0].timestamp - ins[0].timestamp and rows["d-0"]["latency_ms"] is None

    # an aggregating query: the latency is the commit of the batch that read the record minus its append
    agg = record_latencies(kafka_bootstrap, topics["in"], topics["out"], topics["dead"], per_record=False,
                           observations=obs, ranges=batch_ranges(tmp_path, obs), since_ms=since_ms, node_at=nodes)
    assert agg.basis == BATCH_COMMIT
    commit_ms = round(obs[1].time * 1000)
    got = dict(zip(agg.keys, agg.done_ms - agg.appended_ms, strict=True))
    assert got["a-0"] == commit_ms - ins[0].timestamp and got["b-0"] == commit_ms - ins[1].timestamp
    assert np.isnan(got["d-0"])


def test_a_topic_without_log_append_time_is_said_so(kafka_bootstrap: str, tmp_path: Path) -> None:
    tag = f"cre{time.monotonic_ns()}"
    for role in ("in", "out", "dead"):
        ensure_topic(kafka_bootstrap, f"{tag}-{role}", 1)
    _send(kafka_bootstrap, f"{tag}-in", [(b"a", _ride("a-0"), 0)])
    rec = record_latencies(kafka_bootstrap, f"{tag}-in", f"{tag}-out", f"{tag}-dead", per_record=True,
                           observations=[], ranges=[], since_ms=0)
    run, _ = report(rec, [time.time()])
    assert rec.stamps["input"] == ["CreateTime"] and not run["broker_append_times"]


def test_the_timeline_gains_a_latency_panel(tmp_path: Path) -> None:
    import matplotlib.image

    from gesscale.mape import StepRecord
    from gesscale.observation import Decision, Observation
    from gesscale.testbed.report import plot_timeline

    steps = [StepRecord(Observation(time_s=10.0 * i, period_s=10.0, input_rate=100.0, throughput=100.0, backlog=0.0,
                                    backlog_growth=0.0, bp_upstream=0.0, bp_operator=0.0, replicas=("fog1",),
                                    nd_max_ms=0.0), Decision(1, "steady"), None, False) for i in (1, 2, 3)]
    periods = [{"records": 10, "p50_s": 1.0, "p95_s": 2.0, "p99_s": 3.0, "max_s": 4.0},
               {"records": 0, "p50_s": None, "p95_s": None, "p99_s": None, "max_s": None},
               {"records": 5, "p50_s": 0.5, "p95_s": 12.0, "p99_s": 20.0, "max_s": None}]
    run = {"records": 15, "p50_s": 1.0, "p95_s": 12.0, "p99_s": 20.0, "max_s": None, "over_slo_share": 0.2,
           "slo_s": 10.0, "basis": "output append"}
    with_panel = plot_timeline(steps, [], None, tmp_path / "a.png", "t", None, periods, run)
    without = plot_timeline(steps, [], None, tmp_path / "b.png", "t")
    h_with, h_without = (matplotlib.image.imread(p).shape[0] for p in (with_panel, without))
    assert h_with == h_without * 4 // 3  # four panels of the same height instead of three
