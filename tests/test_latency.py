"""gesscale/latency.py: percentiles, shares, periods and the simulator's FIFO model, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gesscale import latency
from gesscale.metrics import late_share


def test_nearest_rank_percentiles_of_ten_records() -> None:
    # sorted: 1 2 3 4 5 6 7 8 9 10 -> p50 is the 5th (5), p95 and p99 the 10th (10)
    v = [7, 1, 10, 3, 5, 2, 9, 4, 8, 6]
    assert latency.percentile(v, 50) == 5
    assert latency.percentile(v, 95) == 10
    assert latency.percentile(v, 10) == 1
    assert latency.percentile(v, 11) == 2  # 11 % of 10 records is 1.1: the second record


def test_weights_count_each_value_that_many_times() -> None:
    # 3 records at 1 s, 1 at 10 s: p50 = 1 (3 of 4 at or below), p95 = 10
    assert latency.percentile([10, 1], 50, [1, 3]) == 1
    assert latency.percentile([10, 1], 95, [1, 3]) == 10
    assert latency.percentile([10, 1], 75, [1, 3]) == 1  # exactly 75 %: the third record
    assert math.isnan(latency.percentile([1.0], 50, [0]))


def test_summary_and_shares_by_hand() -> None:
    v = [0.5, 1.0, 2.0, 12.0]  # one record above the 10 s SLO, none above 300 s
    s = latency.run_summary(v)
    assert s == {"records": 4, "p50_s": 1.0, "p95_s": 12.0, "p99_s": 12.0, "max_s": 12.0,
                 "over_bound_share": 0.0, "over_slo_share": 0.25, "bound_s": 300.0, "slo_s": 10.0}
    assert latency.summarize([]) == {"records": 0, "p50_s": None, "p95_s": None, "p99_s": None, "max_s": None}


def test_a_record_never_processed_is_above_every_bound_and_nulls_the_top_percentiles() -> None:
    v = [1.0] * 99 + [math.inf]
    s = latency.run_summary(v, bound_s=300, slo_s=10)
    assert s["p50_s"] == 1.0 and s["p99_s"] == 1.0  # the 99th of 100 is still a processed one
    assert s["max_s"] is None
    assert s["over_bound_share"] == pytest.approx(0.01) and s["over_slo_share"] == pytest.approx(0.01)


def test_records_count_in_the_period_of_their_arrival() -> None:
    # periods end at 10, 20, 30: arrivals 0 and 10 -> first, 10.5 and 20 -> second, 35 (after the last) -> third
    arrivals = [0.0, 10.0, 10.5, 20.0, 35.0]
    lat = [1.0, 2.0, 3.0, 4.0, 5.0]
    periods = latency.by_period(arrivals, lat, [10.0, 20.0, 30.0])
    assert [p["records"] for p in periods] == [2, 2, 1]
    assert [p["max_s"] for p in periods] == [2.0, 4.0, 5.0]
    assert periods[1]["p50_s"] == 3.0
    with pytest.raises(ValueError):
        latency.by_period([1.0], [1.0], [20.0, 10.0])


def test_fifo_waits_by_hand() -> None:
    # step:        0  1  2  3  4
    # arrivals:    2  2  0  0  0
    # departures:  1  1  1  1  0
    # records 1-2 arrive at 0; record 2 leaves in step 1 -> wait 1; records 3-4 arrive at 1, record 4 leaves in
    # step 3 -> wait 2; steps 2-4 have no arrivals (their "last record" is the one before them).
    w = latency.fifo_waits([2, 2, 0, 0, 0], [1, 1, 1, 1, 0])
    assert list(w[:2]) == [1.0, 2.0]
    run, periods = latency.simulated([2, 2, 0, 0, 0], [1, 1, 1, 1, 0], dt=1.0, period_steps=2, slo_s=1.5)
    assert run["records"] == 4 and run["p50_s"] == 1.0 and run["max_s"] == 2.0
    assert run["over_slo_share"] == 0.5
    assert [p["records"] for p in periods] == [4, 0, 0]


def test_fifo_waits_unprocessed_records_are_infinite() -> None:
    w = latency.fifo_waits([3, 0], [1, 1])  # one record left at the end
    assert math.isinf(w[0])


def test_the_fifo_model_is_late_share_above_the_bound() -> None:
    rng = np.random.default_rng(3)
    a = rng.poisson(5, 400).astype(float)
    d = np.minimum(np.cumsum(a), np.cumsum(np.full(400, 4.6))) - np.concatenate([[0], np.minimum(
        np.cumsum(a), np.cumsum(np.full(400, 4.6)))[:-1]])
    for bound in (0, 3, 20, 50):
        assert latency.share_above(latency.fifo_waits(a, d), bound, a) == pytest.approx(late_share(a, d, bound))


def test_period_columns_of_a_summary_and_of_nothing() -> None:
    s = latency.summarize([1.0, 3.0])
    assert latency.period_columns(s) == {"latency_records": 2, "latency_p50_s": 1.0, "latency_p95_s": 3.0,
                                         "latency_p99_s": 3.0, "latency_max_s": 3.0}
    assert set(latency.period_columns(None).values()) == {""}
    assert tuple(latency.period_columns(None)) == latency.PERIOD_COLUMNS


def test_simulate_json_gains_the_latency_of_each_policy_by_hand() -> None:
    from gesscale.report import simulate_json
    from gesscale.scenario import scenario_from_dict
    from gesscale.simulate import run_once

    # static, one replica of MST 100/s: 150/s for 10 s leaves 500 records waiting, drained by 50/s of spare
    # capacity in the next 10 s; the last record of second 9 (the 1500th) leaves in second 14: wait 5 s.
    sc = scenario_from_dict({
        "name": "tiny", "control_period_s": 10,
        "cluster": {"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 10}}, "max_replicas": 2},
        "operator": {"alpha": 100, "beta": 1.0, "gamma": 0.0, "noise": 0.0, "reconfig_pause_s": 0,
                     "initial_replicas": 1},
        "workload": {"kind": "steps", "levels": [150, 50, 50, 50], "step_s": 10}})
    run = run_once(sc, "static", 1)  # type: ignore[arg-type]
    doc = simulate_json("tiny", run.duration_s, {"static": [run]})
    lat = doc["latency"]["by_policy"]["static"]
    assert doc["latency"]["bound_s"] == 300.0 and doc["latency"]["slo_s"] == 10.0
    assert lat["records"] == 3000 and lat["max_s"] == 5.0 and lat["over_bound_share"] == 0.0
    # By hand (the last record of each second, FIFO): seconds 0-9 (150 records each) wait 1,1,2,2,3,3,4,4,5,5 s;
    # seconds 10-18 (50 each) 5,4,4,3,3,2,2,1,1 s; seconds 19-39 (1050 records) 0 s. Sorted: 1050 at 0, 400 at
    # 1 (1450), 400 at 2 (1850), 400 at 3, 400 at 4 (2650), 350 at 5 (3000): the 1500th is 2 s, the 2850th 5 s.
    assert list(latency.fifo_waits(run.input, run.processed)[:20]) == \
        [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0]
    assert lat["p50_s"] == 2.0 and lat["p95_s"] == 5.0 and lat["p99_s"] == 5.0 and lat["over_slo_share"] == 0.0
    assert set(doc) == {"scenario", "duration_s", "policies", "references", "regret", "seeds", "latency"}
