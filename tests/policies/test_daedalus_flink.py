"""daedalus and flink-autoscaler on hand-made observations."""

from __future__ import annotations

import math

import pytest

from gesscale.policies.base import make_policy
from gesscale.policies.daedalus import CapacityRegression, recovery_time_s
from gesscale.policies.flink_autoscaler import target_capacity
from tests.policies.helpers import ctx, obs


def test_capacity_regression_extrapolates_to_full_cpu() -> None:
    reg = CapacityRegression()
    assert reg.capacity(2) is None
    reg.add(2, 0.5, 50.0)
    reg.add(2, 1.0, 100.0)
    # throughput = 100 * cpu: 100/s at 100 % CPU; 4 replicas extrapolated linearly: 200/s.
    assert reg.capacity(2) == pytest.approx(100.0)
    assert reg.capacity(4) == pytest.approx(200.0)


def test_recovery_time() -> None:
    assert recovery_time_s(6000, 100, 200, 0) == pytest.approx(60.0)
    # 120 s pause: 120 + (6000 + 100 * 120) / (200 - 100) = 300 s
    assert recovery_time_s(6000, 100, 200, 120) == pytest.approx(300.0)
    assert math.isinf(recovery_time_s(10, 100, 100, 0))


def test_daedalus_picks_the_smallest_scale_out_meeting_the_recovery_target() -> None:
    p = make_policy("daedalus")
    # 2 replicas at 50 % CPU process 50/s: capacity 100/s, 50/s per replica. Input 150/s.
    # 3 replicas (150/s) only match the input: the pause backlog is never recovered. 4 replicas (200/s)
    # recover 120 s of input in 120 + 18000 / 50 = 480 s <= 600 s: Daedalus picks 4.
    d = p.decide(obs(2, input_rate=150, throughput=50, busy=0.5), ctx())
    assert d.target == 4


def test_daedalus_scales_in_when_a_smaller_configuration_is_feasible() -> None:
    p = make_policy("daedalus")
    c = ctx()
    # 6 replicas at 20 % CPU for 60/s: 300/s capacity (50 per replica). 2 replicas (100/s) recover the
    # 120 s pause backlog in 120 + 7200 / 40 = 300 s: feasible, so it scales in to 2.
    assert p.decide(obs(6, input_rate=60, throughput=60, busy=0.2), c).target == 2
    # ... but never within min_gap_s (300 s) of the last rescale.
    assert p.decide(obs(6, input_rate=60, throughput=60, busy=0.2), ctx(since=240)).target == 6


def test_flink_target_capacity() -> None:
    # 100/s input, restart 300 s, catch-up 1800 s, target utilisation 0.7: 100*300/1800 + 100/0.7 = 159.5
    assert target_capacity(100, 0, 0.7, 300, 1800) == pytest.approx(16.667 + 142.857, abs=1e-2)
    # plus lag 18000 / 1800 s = 10/s
    assert target_capacity(100, 18000, 0.7, 300, 1800) == pytest.approx(169.52, abs=1e-2)


def test_flink_autoscaler_scales_up_after_the_metric_window() -> None:
    p = make_policy("flink-autoscaler", stabilization_s=0.0, window_s=120.0)
    saturated = dict(input_rate=100, throughput=100, busy=1.0, bp=1.0)
    assert p.decide(obs(2, t=60, **saturated), ctx()).target == 2  # window not full
    # TPR 100/s < 100/1.0 + 16.7 needed at the boundary: ceil(2 * 159.5 / 100) = 4
    assert p.decide(obs(2, t=120, **saturated), ctx()).target == 4


def test_flink_autoscaler_delays_and_limits_scale_down() -> None:
    p = make_policy("flink-autoscaler", stabilization_s=0.0, window_s=60.0, scale_down_interval_s=120.0)
    idle = dict(input_rate=50, throughput=50, busy=0.125)
    # TPR 400/s > 50/0.4 + 8.3: scale-down wanted to ceil(8 * 79.8 / 400) = 2, limited by the max factor
    # 0.6 to ceil(8 * 0.4) = 4, and delayed by the scale-down interval (120 s).
    assert p.decide(obs(8, t=60, **idle), ctx()).target == 8
    assert p.decide(obs(8, t=120, **idle), ctx()).target == 8
    assert p.decide(obs(8, t=180, **idle), ctx()).target == 4
