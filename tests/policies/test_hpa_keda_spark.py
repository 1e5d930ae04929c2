"""hpa-cpu, hpa-varga, keda-lag and spark-dra on hand-made observations."""

from __future__ import annotations

import pytest

from gesscale.policies.base import make_policy
from gesscale.policies.hpa import StabilizationWindow, hpa_desired, varga_utilisation
from gesscale.policies.keda import keda_desired
from gesscale.policies.spark_dra import batch_ratio, spark_dra_target
from tests.policies.helpers import ctx, obs


def test_hpa_rule_and_tolerance() -> None:
    # ceil(4 * 0.9 / 0.7) = ceil(5.14) = 6; 0.75 / 0.7 = 1.07 is within the 0.1 tolerance: keep 4.
    assert hpa_desired(4, 0.9, 0.7) == 6
    assert hpa_desired(4, 0.75, 0.7) == 4
    assert hpa_desired(4, 0.35, 0.7) == 2


def test_stabilisation_window_keeps_the_highest_recent_recommendation() -> None:
    w = StabilizationWindow(300.0)
    assert w.apply(60.0, 4, 4) == 4
    # Low recommendations (2) are not applied while the 4 of t=60 is within the last 300 s.
    assert [w.apply(t, 4, 2) for t in (120.0, 240.0, 360.0)] == [4, 4, 4]
    assert w.apply(420.0, 4, 2) == 2  # t=60 has left the window
    assert w.apply(480.0, 2, 5) == 5  # scale-up applies at once


def test_hpa_cpu_decisions() -> None:
    p = make_policy("hpa-cpu")
    assert p.decide(obs(4, cpu=0.9, busy=0.9), ctx()).target == 6
    assert p.decide(obs(4, cpu=0.9, busy=0.9), ctx(since=60)).target == 4  # warm-up


def test_varga_utilisation_adds_the_lag_growth() -> None:
    # Saturated (busy 1), 100/s processed while the lag grows by 3000 in 60 s (50/s): u = 1.5.
    assert varga_utilisation(obs(2, throughput=100, busy=1.0, growth=3000)) == pytest.approx(1.5)
    # Lag shrinking counts as 0: u is the busy ratio.
    assert varga_utilisation(obs(2, throughput=100, busy=0.5, growth=-3000)) == pytest.approx(0.5)
    # ceil(2 * 1.5 / 0.7) = ceil(4.29) = 5
    assert make_policy("hpa-varga").decide(obs(2, throughput=100, busy=1.0, growth=3000), ctx()).target == 5


def test_keda_lag_rule() -> None:
    # ceil(95 / 10) = 10; 21 / (10 * 2) = 1.05 is within tolerance: keep 2.
    assert keda_desired(95, 10, 2) == 10
    assert keda_desired(21, 10, 2) == 2
    assert keda_desired(0, 10, 3) == 0
    # Capped at n_max = 8 by the context, and at the partitions when given.
    assert make_policy("keda-lag").decide(obs(2, backlog=95), ctx()).target == 8
    assert make_policy("keda-lag", partitions=6).decide(obs(2, backlog=95), ctx()).target == 6
    # No lag: n_min.
    assert make_policy("keda-lag").decide(obs(3, backlog=0), ctx()).target == 1


def test_spark_dra_rule() -> None:
    assert spark_dra_target(3, 1.6) == 5  # +round(1.6) = +2
    assert spark_dra_target(3, 0.95) == 4  # +max(round(0.95), 1) = +1
    assert spark_dra_target(3, 0.5) == 3
    assert spark_dra_target(3, 0.3) == 2


def test_spark_dra_batch_ratio_counts_the_backlog() -> None:
    # True rate 100 / 0.5 = 200/s; 6000 pending at the start + 100/s * 60 s arriving = 12000 records,
    # which take 60 s at 200/s: ratio 1.0.
    o = obs(2, input_rate=100, throughput=100, busy=0.5, backlog=6000, growth=0)
    assert batch_ratio(o) == pytest.approx(1.0)
    assert make_policy("spark-dra").decide(o, ctx()).target == 3
    # Idle: 20/s at 200/s true rate, no backlog: ratio 0.1 -> remove one.
    assert make_policy("spark-dra").decide(obs(4, input_rate=20, throughput=20, busy=0.1), ctx()).target == 3
