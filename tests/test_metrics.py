"""Every metric against a hand-computed step-function example."""

from __future__ import annotations

import pytest

from gesscale.metrics import METRIC_KEYS, compute_metrics, late_share

# 10 steps of 60 s (T = 600 s).
DEMAND = [1, 1, 2, 2, 3, 3, 3, 2, 2, 1]
SUPPLY = [1, 2, 2, 2, 2, 3, 4, 4, 2, 2]
# under: step 4 (3 vs 2) -> 1 replica for 1 step; over: step1 +1, step6 +1, step7 +2, step9 +1 -> 5.


def run() -> dict[str, float]:
    m = compute_metrics(
        DEMAND, SUPPLY, dt=60.0, completion_s=660.0,
        supply_until_completion=SUPPLY + [2], backlog=[0, 0, 0, 10, 50, 20, 0, 0, 0, 0, 5],
        delay=[0, 0, 0, 1, 5, 2, 0, 0, 0, 0, 3], reconfigurations=4,
    )
    return m.to_dict()


def test_accuracy_and_timeshare() -> None:
    m = run()
    assert m["accuracy_u"] == pytest.approx(1 * 60 / 600)
    assert m["accuracy_o"] == pytest.approx(5 * 60 / 600)
    assert m["timeshare_u"] == pytest.approx(10.0)   # 1 of 10 steps
    assert m["timeshare_o"] == pytest.approx(40.0)   # 4 of 10 steps


def test_excess_cost_and_counts() -> None:
    m = run()
    assert m["excess_time"] == pytest.approx(60 / 600)
    assert m["cost"] == pytest.approx(sum(SUPPLY + [2]) * 60 / 60)  # replica-minutes
    assert m["reconfigurations"] == 4
    assert m["avg_replicas"] == pytest.approx(sum(SUPPLY) / 10)
    assert m["max_backlog"] == 50


def test_instability_and_jitter() -> None:
    m = run()
    # signs of the 9 changes, demand: 0 + 0 + 0 0 - 0 - ; supply: + 0 0 0 + + 0 - 0
    # they agree only at the third change (0, 0): 8 of 9 differ
    assert m["instability"] == pytest.approx(100 * 8 / 9)
    # supply changes 4, demand changes 4 -> 0 per hour
    assert m["jitter"] == pytest.approx(0.0)


def test_p95_delay() -> None:
    # delay over the whole run: [0,0,0,1,5,2,0,0,0,0,3] -> numpy's linear p95 = 4.0 (between 3 and 5)
    assert run()["p95_delay_s"] == pytest.approx(4.0)


def test_p95_delay_among_seconds_without_capacity_is_inf_without_a_warning() -> None:
    """Seconds with a backlog and no capacity wait forever; numpy interpolating between two of them gave NaN and a
    RuntimeWarning on the demo's screen (thr-nlunaware on a run's twin)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = compute_metrics(DEMAND, SUPPLY, dt=60.0, completion_s=600.0, supply_until_completion=SUPPLY,
                            backlog=[0] * 7 + [5] * 3, delay=[0] * 7 + [float("inf")] * 3, reconfigurations=0)
    assert m.p95_delay_s == float("inf")


def test_keys_are_the_contract() -> None:
    assert tuple(run()) == METRIC_KEYS


def test_mismatched_series_are_rejected() -> None:
    with pytest.raises(ValueError):
        compute_metrics([1, 2], [1], dt=1, completion_s=2, supply_until_completion=[1], backlog=[0], delay=[0],
                        reconfigurations=0)


def test_late_share_counts_the_records_that_wait_past_the_bound() -> None:
    # 10 records a step for 6 steps; nothing processed for 3 steps (a pause), then 20 a step.
    arrivals = [10, 10, 10, 10, 10, 10, 0, 0]
    departures = [0, 0, 0, 20, 20, 20, 0, 0]
    # FIFO: step 0's records leave in step 3 (wait 3), step 1's in 3 (2), step 2's in 4 (2), step 3's in 4 (1),
    # step 4's in 5 (1), step 5's in 5 (0). Waits over 2 steps: step 0 only (10 of 60 records).
    assert late_share(arrivals, departures, 2) == pytest.approx(10 / 60)
    assert late_share(arrivals, departures, 1) == pytest.approx(30 / 60)
    assert late_share(arrivals, departures, 3) == 0.0
    # Records never processed wait past any bound.
    assert late_share([10, 10], [10, 0], 5) == pytest.approx(0.5)
    assert late_share([], [], 1) == 0.0
    with pytest.raises(ValueError):
        late_share([1, 1], [1], 1)
    # compute_metrics reports it beside the contract keys, with the bound of 300 s in steps of dt.
    m = compute_metrics([1] * 3, [1] * 3, dt=100.0, completion_s=300.0, supply_until_completion=[1] * 3,
                        backlog=[0] * 3, delay=[0] * 3, reconfigurations=0, arrivals=[5, 5, 0, 0, 0, 0],
                        departures=[0, 0, 0, 0, 5, 5])
    assert m.late_share == pytest.approx(1.0)  # both steps' records wait 4 steps (400 s > 300 s)
    m = compute_metrics([1] * 3, [1] * 3, dt=100.0, completion_s=300.0, supply_until_completion=[1] * 3,
                        backlog=[0] * 3, delay=[0] * 3, reconfigurations=0, arrivals=[5, 5, 0, 0],
                        departures=[0, 0, 5, 5])
    assert m.late_share == 0.0  # 2 steps (200 s) each
    assert "late_share" not in m.to_dict()
