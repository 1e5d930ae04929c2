"""Elasticity metrics on crafted series: the oracle scores no jitter or instability, a backlog is under-provisioning."""

from __future__ import annotations

import numpy as np
import pytest

from gesscale.metrics import compute_metrics, period_demand, period_supply, replicas_needed
from gesscale.model import Measurement, PerformanceModel
from gesscale.scenario import load_scenario
from gesscale.simulate import run_once, starting_model, takes_model


def _metrics(demand, supply, period=1, effective=None, backlog=None):  # type: ignore[no-untyped-def]
    n = len(demand)
    return compute_metrics(demand, supply, dt=1.0, completion_s=float(n), supply_until_completion=supply,
                           backlog=backlog if backlog is not None else np.zeros(n), delay=np.zeros(n),
                           reconfigurations=0, period=period, effective_demand=effective)


def _flickering_demand(periods: int = 60, period: int = 60) -> np.ndarray:
    """Per-second demand that crosses a replica boundary many times within each period (input noise)."""
    rng = np.random.default_rng(3)
    base = np.repeat(rng.integers(2, 6, periods), period)
    return base + (rng.random(periods * period) < 0.3).astype(int)


def test_period_demand_is_the_most_any_second_needs() -> None:
    assert period_demand([1, 3, 2, 2, 1, 1, 4], 3).tolist() == [3, 2, 4]
    assert period_supply([5, 5, 5, 6, 6, 6, 2], 3).tolist() == [5, 6, 2]


def test_the_oracle_scores_no_jitter_and_no_instability() -> None:
    d = _flickering_demand()
    oracle = np.repeat(period_demand(d, 60), 60)  # what `ideal` provisions: each period's most needed
    m = _metrics(d, oracle, period=60)
    assert m.jitter == 0.0 and m.instability == 0.0
    per_second = _metrics(d, oracle, period=1)  # the former definition counted the flicker as demand changes
    assert per_second.jitter < -100 and per_second.instability > 10


def test_a_lagging_policy_has_instability_and_negative_jitter() -> None:
    d = _flickering_demand()
    oracle = np.repeat(period_demand(d, 60), 60)
    late = np.concatenate([np.full(120, oracle[0]), oracle[:-120]])  # follows the oracle two periods late
    constant = np.full(d.size, int(d.max()))
    assert _metrics(d, late, period=60).instability > 20
    assert _metrics(d, constant, period=60).jitter < -10  # never adapts: fewer supply changes than demand changes


def test_replicas_needed_counts_capacity_and_caps_at_n_max() -> None:
    caps = [0.0, 60.0, 110.0, 150.0, 140.0]  # a non-monotone capacity is taken as the best so far
    assert replicas_needed([10, 60, 61, 150, 151, 1e9], caps, 1, 4).tolist() == [1, 1, 2, 3, 4, 4]
    assert replicas_needed([0.0], caps, 2, 4).tolist() == [2]


def test_a_policy_holding_a_backlog_is_under_provisioned_not_matched() -> None:
    caps = [0.0] + [60.0 * n for n in range(1, 9)]
    rate = np.full(3600, 170.0)  # needs 3 replicas
    backlog = np.full(3600, 80_000.0)
    demand = replicas_needed(rate, caps, 1, 8)
    supply = np.full(3600, 3)
    matched = _metrics(demand, supply)
    assert matched.accuracy_u == 0.0 and matched.timeshare_u == 0.0  # blind to the backlog
    effective = replicas_needed(rate + backlog / 300.0, caps, 1, 8)  # drain it within 300 s: 437/s -> 8
    m = _metrics(demand, supply, effective=effective, backlog=backlog)
    assert m.accuracy_u == pytest.approx(5.0) and m.timeshare_u == 100.0
    assert m.max_backlog == 80_000.0


def test_simulated_oracle_scores_near_zero_on_the_taxi_scenario() -> None:
    sc = load_scenario("scenarios/pi10-taxi.yaml")
    m = run_once(sc, "ideal", sc.seed).metrics
    assert abs(m.jitter) < 1.0 and m.instability < 1.0 and m.timeshare_u < 2.0


def test_model_file_only_for_model_based_policies() -> None:
    assert takes_model("gesscale") and takes_model("mdl-nlunaware")
    assert not takes_model("thr-nlaware") and not takes_model("ideal")
    model = PerformanceModel().fit([Measurement(1, 0.0, 60.0), Measurement(2, 10.0, 110.0),
                                    Measurement(2, 200.0, 90.0), Measurement(3, 10.0, 160.0)])
    flat = starting_model(model, latency_in_model=False)
    assert all(m.nd_max_ms == 0.0 for m in flat.measurements_) and flat.gamma_ == 0.0
    same = starting_model(model, latency_in_model=True)
    assert same.to_dict() == model.to_dict() and same is not model


def test_simulate_starts_gesscale_from_the_model_file() -> None:
    """An optimistic starting model (5x the true MST) makes gesscale's first scale-downs deeper: the run changes."""
    sc = load_scenario("scenarios/pi10-taxi.yaml")
    model = PerformanceModel().fit([Measurement(n, 10.0, 300.0 * n ** 0.9) for n in (1, 2, 3, 4)])
    cold = run_once(sc, "gesscale", sc.seed, keep_history=True)
    warm = run_once(sc, "gesscale", sc.seed, keep_history=True, initial_model=model)
    assert [h.decision.target for h in warm.history] != [h.decision.target for h in cold.history]
    assert warm.metrics.cost != cold.metrics.cost
