"""Progress event → the batch record (gesscale/batch_record.py): backlog, held-back batches, the bp_upstream window."""

from __future__ import annotations

import pytest

from gesscale.batch_record import BatchRecord, Executor
from jobs.observation import OBSERVATION_KEYS, ObservationTracker


def progress(batch: int, ts: str, end: dict, latest: dict, rows: int = 100, duration: int = 1000) -> dict:
    return {
        "batchId": batch, "timestamp": ts, "numInputRows": rows, "inputRowsPerSecond": 50.0,
        "processedRowsPerSecond": 100.0, "batchDuration": duration,
        "sources": [{"startOffset": {"0": 0}, "endOffset": end, "latestOffset": latest}],
    }


EXECUTORS = [{"id": "1", "host": "127.0.0.21", "port": 4000}]


def test_observation_has_the_contract_keys_and_backlog() -> None:
    obs = ObservationTracker(60).update(
        progress(3, "2026-11-22T06:00:00.000Z", {"0": 10, "1": 20}, '{"0": 15, "1": 40}'), EXECUTORS)
    wire = obs.to_dict()
    assert list(wire) == list(OBSERVATION_KEYS)  # the JSON the job writes: every key, in this order
    assert BatchRecord.from_dict(wire) == obs
    assert obs.backlog == 25
    assert obs.held_back is True
    assert obs.batch_id == 3
    assert obs.batch_duration_ms == 1000
    assert obs.bp_operator == 0.0
    assert obs.executors == (Executor("1", "127.0.0.21"),)
    assert wire["executors"] == [{"id": "1", "host": "127.0.0.21"}]
    assert obs.phases_ms == {}  # this event had no durationMs
    timed = ObservationTracker(60).update({**progress(4, "2026-11-22T06:00:01.000Z", {"0": 1}, {"0": 1}),
                                           "durationMs": {"addBatch": 812, "walCommit": 40}}, EXECUTORS)
    assert timed.phases_ms == {"addBatch": 812, "walCommit": 40}


def test_bp_upstream_is_the_held_back_fraction_within_the_window() -> None:
    tracker = ObservationTracker(window_s=10)
    seq = [
        ("2026-11-22T06:00:00Z", True), ("2026-11-22T06:00:02Z", True), ("2026-11-22T06:00:04Z", False),
        ("2026-11-22T06:00:06Z", False),
    ]
    for i, (ts, held) in enumerate(seq):
        obs = tracker.update(progress(i, ts, {"0": 10}, {"0": 11 if held else 10}), [])
    assert obs.bp_upstream == pytest.approx(0.5)
    # 20 s later the two held-back batches have left the window
    obs = tracker.update(progress(9, "2026-11-22T06:00:26Z", {"0": 10}, {"0": 10}), [])
    assert obs.bp_upstream == 0.0
    assert tracker.latest is obs


def test_missing_latest_offset_means_no_backlog_and_bad_window_is_refused() -> None:
    p = progress(0, "2026-11-22T06:00:00Z", {"0": 10}, None)
    assert ObservationTracker().update(p, []).backlog == 0
    with pytest.raises(ValueError):
        ObservationTracker(0)


def test_the_batch_range_and_the_rows_dropped_by_the_watermark_are_kept() -> None:
    event = {**progress(5, "2026-11-22T06:00:00.000Z", {"0": 10, "1": 20}, {"0": 10, "1": 20}),
             "stateOperators": [{"numRowsDroppedByWatermark": 3}, {"numRowsDroppedByWatermark": 1}, {}]}
    event["sources"][0]["startOffset"] = '{"0": 4, "1": 20}'
    obs = ObservationTracker(60).update(event, EXECUTORS)
    assert (obs.start_offsets, obs.end_offsets, obs.late_rows) == ({"0": 4, "1": 20}, {"0": 10, "1": 20}, 4)
    first = ObservationTracker(60).update({**progress(0, "2026-11-22T06:00:00Z", {"0": 3}, {"0": 3}),
                                           "sources": [{"startOffset": None, "endOffset": {"0": 3}}]}, EXECUTORS)
    assert (first.start_offsets, first.late_rows) == ({}, 0)


def test_the_counts_of_the_batch_write_follow_the_contract_keys() -> None:
    counts = {"written": 90, "skipped": 2, "dead_letters": 8}
    obs = ObservationTracker(60).update(progress(6, "2026-11-22T06:00:00Z", {"0": 10}, {"0": 10}), [], counts)
    wire = obs.to_dict()
    assert list(wire) == [*OBSERVATION_KEYS, "written", "skipped", "dead_letters"]
    assert {k: wire[k] for k in counts} == counts
    assert (obs.written, obs.skipped, obs.dead_letters) == (90, 2, 8)
