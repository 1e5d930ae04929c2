"""DS2 and Dhalion on hand-made observations."""

from __future__ import annotations

import pytest

from gesscale.policies.base import make_policy
from gesscale.policies.dhalion import dhalion_scale_down, dhalion_scale_up
from gesscale.policies.ds2 import ds2_parallelism
from tests.policies.helpers import ctx, obs


def test_ds2_formula() -> None:
    # 300 records/s at a true rate of 50 per replica: 6; with 20 % over-provisioning ceil(7.2) = 8.
    assert ds2_parallelism(300, 50) == 6
    assert ds2_parallelism(300, 50, over_provisioning=1.2) == 8
    assert ds2_parallelism(0, 50) == 1
    with pytest.raises(ValueError):
        ds2_parallelism(100, 0)


def test_ds2_uses_the_busy_time_true_rate() -> None:
    p = make_policy("ds2")
    # Saturated 2 replicas process 100/s: 50 per replica; 300/s of input needs 6.
    assert p.decide(obs(2, input_rate=300, throughput=100, busy=1.0, bp=1.0), ctx()).target == 6
    # 4 replicas, 100/s at 50 % busy: true rate 200/s, 50 per replica; 100/s of input needs 2.
    assert p.decide(obs(4, input_rate=100, throughput=100, busy=0.5), ctx()).target == 2


def test_ds2_waits_for_warmup_and_for_a_metric() -> None:
    p = make_policy("ds2")
    assert p.decide(obs(2, input_rate=300, throughput=100, busy=1.0), ctx(since=60)).target == 2
    assert p.decide(obs(2, input_rate=300, busy=None, cpu=None), ctx()).target == 2


def test_dhalion_factors() -> None:
    # bp 0.5: factor 1 + 0.5/0.5 = 2 -> 2 replicas become 4; bp 0.2: 4 * 1.25 = 5.
    assert dhalion_scale_up(2, 0.5) == 4
    assert dhalion_scale_up(4, 0.2) == 5
    assert dhalion_scale_up(3, 0.01) == 4  # at least one more
    assert dhalion_scale_up(1, 1.0) == 20  # bp capped at 0.95: factor 20
    assert dhalion_scale_down(5, 0.8) == 4
    assert dhalion_scale_down(2, 0.8) == 1


def test_dhalion_scales_up_on_back_pressure() -> None:
    p = make_policy("dhalion")
    assert p.decide(obs(2, bp=0.5, busy=1.0, backlog=5000, growth=3000), ctx()).target == 4


def test_dhalion_scales_down_after_idle_periods_undoes_and_blacklists() -> None:
    p = make_policy("dhalion")
    idle = dict(input_rate=100, throughput=100, busy=0.4, bp=0.0, backlog=0.0)
    c = ctx()
    assert [p.decide(obs(5, t=60.0 * i, **idle), c).target for i in (1, 2)] == [5, 5]
    assert p.decide(obs(5, t=180.0, **idle), c).target == 4  # third idle period: floor(5 * 0.8) = 4
    # Back pressure right after the scale-down: undo to 5 and black-list 4.
    assert p.decide(obs(4, t=600.0, bp=0.7, busy=1.0, backlog=8000, growth=4000), c).target == 5
    # Three idle periods again: 4 is black-listed for 1800 s, so no scale-down.
    assert [p.decide(obs(5, t=600.0 + 60 * i, **idle), c).target for i in (1, 2, 3)] == [5, 5, 5]
    # After the black-list expires (600 + 1800 s) the queues have been empty for more than 3 periods: down.
    assert p.decide(obs(5, t=2460.0, **idle), c).target == 4
