"""Per-second figures of the live probe target, derived from coarse micro-batches (pure parts, no Spark)."""

from __future__ import annotations

import pytest

from gesscale.batch_record import BatchRecord
from gesscale.probe import ProbeParams, _succeeds
from gesscale.testbed.probe_target import (
    LIVE_PARAMS,
    processed_by,
    saturated_rate,
    steady_rate,
    warmed_up,
    window_from_samples,
)


def _batch(bid: int, end: float, dur_s: float, rows: int, held: bool = False) -> BatchRecord:
    return BatchRecord.from_dict({"batch_id": bid, "time": end, "batch_duration_ms": int(dur_s * 1000),
                                  "num_input_rows": rows, "held_back": held})


def _steady(rate: float, mst: float, t_end: float, durations: tuple[float, ...] = (3.0, 5.0)) -> list[BatchRecord]:
    """Back-to-back batches (durations cycling through `durations`, as on a busy machine), each taking what
    arrived during the previous one, at most what the capacity `mst` gets through in its duration."""
    out, t, bid, waiting = [], 0.0, 0, 0.0
    while t < t_end:
        dur = durations[bid % len(durations)]
        rows = min(waiting, mst * dur)
        waiting += rate * dur - rows
        t += dur
        out.append(_batch(bid, t, dur, int(round(rows)), held=waiting > rate * dur))
        bid += 1
    return out


def test_rows_are_spread_over_each_batch() -> None:
    bs = [_batch(0, 10.0, 4.0, 400), _batch(1, 14.0, 4.0, 800)]
    assert processed_by(bs, 6.0) == 0
    assert processed_by(bs, 8.0) == pytest.approx(200)
    assert processed_by(bs, 10.0) == pytest.approx(400)
    assert processed_by(bs, 13.0) == pytest.approx(1000)


def test_a_replayed_batch_id_is_counted_once_in_a_window() -> None:
    bs = [_batch(0, 10.0, 4.0, 400), _batch(0, 12.0, 1.0, 400)]
    w = window_from_samples(bs, 9.0, [(10.0, 400.0), (11.0, 400.0), (12.0, 400.0)])
    assert sum(w.processed) == pytest.approx(100)
    assert w.backlog == [0.0, 0.0, 0.0]


def _window(rate: float, mst: float, t0: float = 40.0, seconds: int = 20):
    bs = _steady(rate, mst, t0 + seconds + 8)
    ends = [(t0 + i + 1, rate * (t0 + i + 1)) for i in range(seconds)]
    return window_from_samples(bs, t0, ends)


def test_a_sustained_rate_passes_the_live_criterion_and_an_overload_fails_it() -> None:
    ok, processed = _succeeds(300.0, _window(300.0, 400.0), LIVE_PARAMS)
    assert ok and processed == pytest.approx(300.0, rel=0.05)
    ok, processed = _succeeds(440.0, _window(440.0, 400.0), LIVE_PARAMS)  # 10% over the capacity
    assert not ok and processed == pytest.approx(400.0, rel=0.05)
    # Batches of uneven length make a sustained rate's backlog move by tens of records over the window: the
    # simulator's criterion (0.1% backlog growth) would read that as overload.
    assert not _succeeds(300.0, _window(300.0, 400.0, t0=42.0), ProbeParams())[0]
    assert _succeeds(300.0, _window(300.0, 400.0, t0=42.0), LIVE_PARAMS)[0]


def test_saturated_rate_uses_whole_held_back_batches() -> None:
    bs = [_batch(0, 5.0, 1.0, 100), _batch(1, 10.0, 5.0, 2000, True), _batch(2, 15.0, 5.0, 2000, True),
          _batch(3, 20.0, 5.0, 2000, True), _batch(4, 22.0, 2.0, 700)]
    assert saturated_rate(bs) == pytest.approx(4000 / 10.0)
    assert saturated_rate(bs[:3]) is None


def test_steady_rate_is_taken_over_the_newest_held_back_batches_after_the_start() -> None:
    # a cold start (slow batches) then steady ones: only the last five held-back batches count
    cold = [_batch(i, 10.0 * (i + 1), 10.0, 2000, True) for i in range(3)]
    steady = [_batch(3 + i, 30.0 + 4.0 * (i + 1), 4.0, 2000, True) for i in range(6)]
    drained = [_batch(9, 56.0, 1.0, 300)]
    bs = cold + steady + drained
    assert steady_rate(bs, since=0.0) == pytest.approx(4 * 2000 / 16.0)
    assert steady_rate(bs, since=0.0, last=8) < 4 * 2000 / 16.0  # reaching back into the cold batches
    assert steady_rate(bs, since=47.0) is None  # batches completed before `since` are not the warm-up's
    assert steady_rate(bs, since=41.0) == pytest.approx(3 * 2000 / 12.0)


def test_testbed_nodes_are_the_union_of_the_configurations_in_map_order() -> None:
    from gesscale.latency_map import load_latency_map
    from gesscale.probe import configurations
    from gesscale.testbed import DEFAULT_MAP
    from gesscale.testbed.calibration import testbed_nodes

    lmap = load_latency_map(DEFAULT_MAP)
    configs = configurations(lmap, [1, 2, 3], ["near"])
    assert [len(c) for c in configs] == [1, 2, 3]
    nodes = testbed_nodes(lmap, configs)
    assert set(nodes) == set(configs[-1]) and nodes == [n for n in lmap.names if n in nodes]


def test_live_configurations_are_measured_largest_first() -> None:
    from gesscale.testbed.calibration import measuring_order

    configs = [("a",), ("a", "b"), ("a", "c"), ("a", "b", "c")]
    assert measuring_order(configs) == [("a", "b", "c"), ("a", "b"), ("a", "c"), ("a",)]


def _timed(durations_ms: list[int], rows: int = 2000) -> list[BatchRecord]:
    return [BatchRecord(time=float(i), batch_id=i, num_input_rows=rows, batch_duration_ms=d)
            for i, d in enumerate(durations_ms)]


def test_warmed_up_once_batches_stop_getting_shorter() -> None:
    assert not warmed_up(_timed([9000, 6000]))  # too few batches to tell
    assert not warmed_up(_timed([9000, 6000, 4000]))  # still 2.25x faster within three batches
    assert warmed_up(_timed([9000, 6000, 4000, 3800, 3700]))  # 4000 -> 3700 ms: within 15%
    assert warmed_up(_timed([3000, 3100, 3600]))  # slower (noise) is no warming up either
    empty = [BatchRecord(time=9.0, batch_id=9, num_input_rows=0, batch_duration_ms=50)]
    assert not warmed_up(_timed([9000, 6000, 4000]) + empty)  # empty batches say nothing
