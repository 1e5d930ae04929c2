"""gesscale-plus on hand-made observations: sizing with backlog and pause, staying, payback, hysteresis."""

from __future__ import annotations

import pytest

from gesscale.model import Measurement
from gesscale.policies.base import make_policy
from gesscale.policies.gesscale_plus import capacity_with, catch_up_time_s
from gesscale.policies.signals import PauseTracker
from tests.policies.helpers import FLAT, ctx, nodes, obs


def calibrated(**options: object):  # type: ignore[no-untyped-def]
    """A gesscale-plus whose model knows MST = 60 n (the flat cluster: one ND_max, beta left at 1)."""
    p = make_policy("gesscale-plus", **options)
    p.model.add(Measurement(2, 10.0, 120.0))
    return p


def test_catch_up_time() -> None:
    assert catch_up_time_s(6000, 100, 200, 0) == pytest.approx(60.0)
    assert catch_up_time_s(6000, 100, 200, 120) == pytest.approx(120 + 18000 / 100)
    assert catch_up_time_s(10, 100, 50, 0) == float("inf")  # capacity below the input: never
    assert catch_up_time_s(0, 100, 50, 0) == 0.0  # nothing to catch up


def test_capacity_with_uses_the_latency_aware_set() -> None:
    p = calibrated()
    g = FLAT.graph()
    assert capacity_with(p.model, g, nodes(2), tuple(FLAT.names), 5) == pytest.approx(300.0)
    assert capacity_with(p.model, g, nodes(4), tuple(FLAT.names), 1) == pytest.approx(60.0)
    assert capacity_with(p.model, g, nodes(8), tuple(FLAT.names), 9) == 0.0  # only 8 nodes


def test_scale_up_sizes_for_input_backlog_and_its_own_pause() -> None:
    # 2 replicas saturated at 120/s, input 200/s, backlog 12000. Need 200 + (12000 + 200 * 120) / 1800
    # = 220/s: 4 replicas (240/s) in one step, where Gesscale adds one.
    o = obs(2, input_rate=200, throughput=120, busy=1.0, bp=1.0, backlog=12000, growth=4800)
    assert calibrated().decide(o, ctx()).target == 4
    assert make_policy("gesscale").decide(o, ctx()).target == 3


def test_scale_up_to_n_max_when_nothing_suffices() -> None:
    o = obs(2, input_rate=600, throughput=120, busy=1.0, bp=1.0, backlog=30000, growth=20000)
    assert calibrated().decide(o, ctx()).target == 8


def test_stays_when_catching_up_beats_a_reconfiguration() -> None:
    # 4 replicas (240/s), input 100/s, backlog 260000 and a 1500 s pause: staying drains in 260000 / 140
    # = 1857 s; moving to 6 takes 1500 + (260000 + 150000) / 260 = 3077 s. It stays.
    p = calibrated(pause_prior_s=1500.0)
    o = obs(4, input_rate=100, throughput=240, busy=1.0, bp=1.0, backlog=260000, growth=-8400)
    d = p.decide(o, ctx())
    assert d.target == 4
    assert "faster" in d.reason
    # With the usual 120 s pause: need 100 + (260000 + 12000) / 1800 = 251/s -> 5 replicas (300/s), and moving
    # (120 + 272000 / 200 = 1480 s) beats staying (1857 s).
    assert calibrated().decide(o, ctx()).target == 5


def test_hysteresis_band_holds() -> None:
    # 5 replicas (300/s) for 280/s: no scale-up (300 >= 280) and 4 replicas (240/s) are below
    # 280 * (1 + 120/1800) = 298.7/s: steady.
    p = calibrated()
    for i in range(20):
        assert p.decide(obs(5, t=60.0 * (i + 1), input_rate=280, throughput=280, busy=280 / 300), ctx()).target == 5


def test_down_margin_widens_the_band() -> None:
    # With a 10 % margin, 5 replicas (300/s) no longer qualify for 260/s: 277.3 * 1.1 = 305/s.
    p = calibrated(down_margin=0.1)
    for i in range(1, 15):
        assert p.decide(obs(6, t=60.0 * i, input_rate=260, throughput=260, busy=260 / 360), ctx()).target == 6


def test_scale_down_waits_for_the_payback_time() -> None:
    # 6 replicas for 260/s: 5 replicas (300/s) >= 260 * (1 + 120/1800) = 277.3/s. Payback of going to 5:
    # 5 * 120 s / 1 = 600 s, i.e. ten 60 s periods of surplus before the scale-down.
    p = calibrated()
    targets = [
        p.decide(obs(6, t=60.0 * i, input_rate=260, throughput=260, busy=260 / 360), ctx()).target
        for i in range(1, 11)
    ]
    assert targets == [6] * 9 + [5]


def test_large_surplus_is_shed_at_once() -> None:
    # 6 replicas for 100/s: 2 replicas (120/s) >= 100 * (1 + 120/1800) = 106.7/s; payback 2 * 120 / 4 = 60 s,
    # met after one period: straight to 2.
    p = calibrated()
    assert p.decide(obs(6, input_rate=100, throughput=100, busy=100 / 360), ctx()).target == 2


def test_no_scale_down_with_a_backlog_or_in_warmup() -> None:
    p = calibrated()
    assert p.decide(obs(6, input_rate=100, throughput=360, busy=1.0, bp=1.0, backlog=20000,
                        growth=-15000), ctx()).target == 6
    assert p.decide(obs(6, input_rate=100, throughput=100, busy=0.3), ctx(since=120)).target == 6


def test_uncalibrated_falls_back_to_gesscale_plus_one() -> None:
    p = make_policy("gesscale-plus")
    o = obs(2, input_rate=200, throughput=120, busy=None, cpu=None, bp=1.0, backlog=5000, growth=4800)
    o = o.__class__(**{**o.__dict__, "bp_upstream": 0.4})  # not root of back pressure: no measurement
    assert p.decide(o, ctx()).target == 2
    o2 = obs(2, input_rate=200, throughput=0.0, busy=None, cpu=None, bp=1.0, backlog=5000, growth=4800)
    assert p.decide(o2, ctx()).target == 3  # root of back pressure, throughput 0 is no measurement: +1


def test_busy_time_calibrates_the_model_without_saturation() -> None:
    p = make_policy("gesscale-plus")
    p.decide(obs(2, input_rate=60, throughput=60, busy=0.5), ctx())
    assert p.model.is_fitted
    assert p.model.predict(2, 10.0) == pytest.approx(120.0)


def test_pause_is_learned_from_observations() -> None:
    tracker = PauseTracker(prior_s=300.0)
    for paused in (60.0, 60.0, 0.0):
        tracker.update(obs(3, paused_s=paused))
    assert tracker.estimate_s == pytest.approx(120.0)
    for paused in (60.0, 0.0):
        tracker.update(obs(3, paused_s=paused))
    assert tracker.estimate_s == pytest.approx(90.0)  # 0.5 * 60 + 0.5 * 120


def test_state_round_trip() -> None:
    p = calibrated()
    p.decide(obs(3, input_rate=100, throughput=100, busy=100 / 180), ctx())
    q = make_policy("gesscale-plus")
    q.load_state_dict(p.state_dict())
    assert q.model.predict(5, 10.0) == pytest.approx(p.model.predict(5, 10.0))
    assert q.model_summary()["pause_s"] == pytest.approx(120.0)


def test_on_the_steps_scenario_it_finishes_with_the_input_for_less_than_gesscale() -> None:
    # pi10-steps, seed 1 (the convergence test): Gesscale climbs each step one replica and one pause at a
    # time and ends 0.0277 of the input duration late; gesscale-plus sizes each step at once and ends on time,
    # with fewer reconfigurations and no more cost.
    from pathlib import Path

    from gesscale.scenario import load_scenario
    from gesscale.simulate import run_once

    sc = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "pi10-steps.yaml")
    plus, base = run_once(sc, "gesscale-plus", 1).metrics, run_once(sc, "gesscale", 1).metrics
    assert plus.excess_time < base.excess_time
    assert plus.reconfigurations < base.reconfigurations
    assert plus.cost <= base.cost
