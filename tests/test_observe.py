"""`observation_from_batches` (gesscale/observe.py) on a recorded batch log: the shortened live demo's
`batches.jsonl` and the periods the local backend observed from it in that run (tests/data, recorded from
tests/testbed/test_live_e2e.py). Each recorded period is computed again from the batches and the broker figures
the backend had, and must come out the same; the sampled (Kubernetes) form is checked on samples of the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.batch_record import BatchRecord
from gesscale.observe import InputOffsets, observation_from_batches

DATA = Path(__file__).parent / "data"
BATCHES = [BatchRecord.from_dict(json.loads(line))
           for line in (DATA / "live_demo_batches.jsonl").read_text().splitlines()]
PERIODS = [json.loads(line) for line in (DATA / "live_demo_periods.jsonl").read_text().splitlines()]
RECONFIGURATIONS = [json.loads(line) for line in (DATA / "live_demo_reconfigurations.jsonl").read_text().splitlines()]


def _period_end(processed_total: int) -> float:
    """The completion time of the batch after which the job had processed `processed_total` rows (distinct ids):
    where the backend ended that period (it ends a period on a batch)."""
    total, seen = 0, set()
    for b in BATCHES:
        if b.batch_id not in seen:
            seen.add(b.batch_id)
            total += b.num_input_rows
        if total == processed_total:
            return b.time
    raise AssertionError(f"no batch ends at {processed_total} rows")


def _replayed(period: dict, previous: dict | None) -> tuple:
    """The recorded period, and the same period computed again from the recorded batches."""
    extra = period["extra"]
    t1 = _period_end(extra["processed_total"])
    t0 = t1 - period["period_s"]
    batches = [b for b in BATCHES if t0 + 1e-3 < b.time <= t1]
    # what arrived since the previous observation (unknown after a reconfiguration, which the MAPE loop records at
    # the time of the observation that asked for it: the backend starts over then)
    changed = previous is None or any(previous["time_s"] <= r["time_s"] < period["time_s"] for r in RECONFIGURATIONS)
    arrived = extra["input_total"] - (previous["extra"]["input_total"] if not changed else 0)
    end, processed = extra["input_total"], extra["processed_total"]
    obs = observation_from_batches(
        batches, time_s=period["time_s"], period_s=period["period_s"], replicas=("fog1",), nd_max_ms=0.0,
        offsets=InputOffsets(end=end, arrived=arrived, elapsed_s=1.0, processed=processed),
        extra={"processed_total": processed, "input_total": end},
    )
    return obs, changed


def test_the_recorded_periods_come_out_the_same_from_the_recorded_batches() -> None:
    assert len(PERIODS) == 21
    checked_growth = 0
    for previous, period in zip([None, *PERIODS], PERIODS, strict=False):
        obs, changed = _replayed(period, previous)
        assert obs.extra == period["extra"]  # the same number of batches in the period
        assert obs.throughput == period["throughput"]
        assert obs.backlog == period["backlog"]
        assert obs.bp_upstream == period["bp_upstream"]
        assert obs.bp_operator == period["bp_operator"] == 0.0
        assert obs.busy == period["busy"]
        if not changed:
            assert obs.backlog_growth == period["backlog_growth"]
            checked_growth += 1
    assert checked_growth == 18


def test_with_the_broker_offsets_the_input_rate_is_what_arrived_over_its_time() -> None:
    batches = [b for b in BATCHES if b.batch_id in (11, 12)]  # two full, held-back batches
    obs = observation_from_batches(batches, time_s=10.0, period_s=8.0, replicas=("fog1", "fog2"), nd_max_ms=8.7,
                                   offsets=InputOffsets(end=30_000, arrived=3_000, elapsed_s=7.5, processed=26_000),
                                   cpu=0.5)
    assert obs.input_rate == pytest.approx(400.0)
    assert obs.throughput == pytest.approx(4000 / 8.0)
    assert obs.backlog == 4000.0
    # at the start: 30000 - 3000 arrived - (26000 - 4000 processed in the period) = 5000
    assert obs.backlog_growth == -1000.0
    assert obs.bp_upstream == 1.0 and obs.cpu == 0.5 and obs.n == 2 and obs.nd_max_ms == 8.7
    assert obs.busy == pytest.approx(min(1.0, sum(b.batch_duration_ms for b in batches) / 8000.0))
    assert obs.extra == {"batches": 2}


def test_a_period_without_batches_is_no_measurement_of_back_pressure() -> None:
    obs = observation_from_batches([], time_s=1.0, period_s=5.0, replicas=("fog1",), nd_max_ms=0.0,
                                   offsets=InputOffsets(end=100, arrived=50, elapsed_s=5.0, processed=100))
    assert (obs.throughput, obs.backlog, obs.bp_upstream, obs.busy) == (0.0, 0.0, 0.0, 0.0)
    assert obs.input_rate == 10.0


def test_sampled_batches_estimate_the_rows_from_the_batch_ids() -> None:
    # The driver serves only its latest batch: sampling every few seconds sees batches 12, 14 and 15 of the
    # log after having seen 10 before the period: 5 batches completed, of mean rows those of the samples.
    by_id = {b.batch_id: b for b in BATCHES}
    before, samples = by_id[10], [by_id[12], by_id[14], by_id[15]]
    obs = observation_from_batches(samples, time_s=1.0e9, period_s=10.0, replicas=("n1",), nd_max_ms=1.0,
                                   before=before, sampled=True, extra={"executors": []})
    processed = sum(float(b.num_input_rows) for b in samples) / 3 * (15 - 10)
    assert obs.throughput == pytest.approx(processed / 10.0) == pytest.approx(1000.0)
    assert obs.backlog == float(by_id[15].backlog)  # the job's own backlog, from its newest batch
    assert obs.backlog_growth == float(by_id[15].backlog - before.backlog)
    assert obs.input_rate == pytest.approx(max(0.0, (processed + obs.backlog_growth) / 10.0))
    assert obs.bp_upstream == 1.0  # every sample was held back
    assert obs.busy is None and obs.cpu is None  # samples do not cover the period
    assert obs.extra == {"batches": 3, "executors": []}
    # the order samples arrive in does not matter; without a batch before, the span starts at the first sample
    assert observation_from_batches(samples[::-1], time_s=1.0e9, period_s=10.0, replicas=("n1",), nd_max_ms=1.0,
                                    before=before, sampled=True).throughput == obs.throughput
    alone = observation_from_batches(samples, time_s=0.0, period_s=10.0, replicas=("n1",), nd_max_ms=1.0,
                                     sampled=True)
    assert alone.throughput == pytest.approx(sum(b.num_input_rows for b in samples) / 3 * 4 / 10.0)
    assert alone.backlog_growth == float(by_id[15].backlog)


def test_with_no_new_sample_the_job_s_own_figures_stand() -> None:
    before = next(b for b in BATCHES if b.batch_id == 20)
    obs = observation_from_batches([], time_s=0.0, period_s=10.0, replicas=("n1",), nd_max_ms=1.0, before=before,
                                   sampled=True)
    assert (obs.throughput, obs.backlog_growth, obs.input_rate) == (0.0, 0.0, 0.0)
    assert obs.backlog == float(before.backlog)
    assert obs.bp_upstream == before.bp_upstream and obs.bp_operator == before.bp_operator
