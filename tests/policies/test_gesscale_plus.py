"""gesscale-plus on hand-made observations: the backlog projection, riding a burst on the queue, deferring a
scale-up, sizing one step for the whole rise, the sublinear prior, payback on scale-down, holding while paused."""

from __future__ import annotations

import pytest

from gesscale.model import Measurement
from gesscale.policies.base import make_policy
from gesscale.policies.gesscale_plus import capacity_with, peak_backlog
from gesscale.policies.signals import PauseTracker
from tests.policies.helpers import FLAT, ctx, nodes, obs


def calibrated(**options: object):  # type: ignore[no-untyped-def]
    """A gesscale-plus whose model knows MST = 60 n at n = 2 (the flat cluster: one ND_max, beta left at 1).

    Unless a test sets it, beta_prior is 1 so that C(m) = 60 m for every m; the learned pause is the 120 s prior.
    """
    p = make_policy("gesscale-plus", **{"beta_prior": 1.0, **options})
    p.model.add(Measurement(2, 10.0, 120.0))
    return p


def test_peak_backlog_with_a_pause_first() -> None:
    # 60 s of pause at 100/s piles up 6000 records; then 200/s drains them in 60 s.
    assert peak_backlog(0.0, 100.0, 0.0, 200.0, 60.0, 120.0) == pytest.approx((6000.0, 0.0))
    # No pause, input above capacity: the backlog grows by 50/s for the whole horizon.
    assert peak_backlog(1000.0, 150.0, 0.0, 100.0, 0.0, 100.0) == pytest.approx((6000.0, 6000.0))
    # A falling input (slope -1/s) from 100/s against 50/s: grows for 50 s (1250 records), then shrinks.
    peak, final = peak_backlog(0.0, 100.0, -1.0, 50.0, 0.0, 100.0, step_s=1.0)
    assert peak == pytest.approx(1250.0, rel=0.01)
    assert final == pytest.approx(0.0, abs=1.0)


def test_capacity_with_uses_the_latency_aware_set() -> None:
    p = calibrated()
    g = FLAT.graph()
    assert capacity_with(p.model, g, nodes(2), tuple(FLAT.names), 5) == pytest.approx(300.0)
    assert capacity_with(p.model, g, nodes(4), tuple(FLAT.names), 1) == pytest.approx(60.0)
    assert capacity_with(p.model, g, nodes(8), tuple(FLAT.names), 9) == 0.0  # only 8 nodes


def test_a_backlog_that_drains_within_the_horizon_is_ridden_out() -> None:
    # 3 replicas (180/s), input 150/s, backlog 20000: drained in 667 s < 2400 s without a pause. No scale-up
    # (which would add a pause), and no scale-down while the backlog is there.
    d = calibrated().decide(obs(3, input_rate=150, throughput=180, busy=1.0, bp=1.0, backlog=20000,
                                growth=-1800), ctx())
    assert d.target == 3
    assert "draining" in d.reason


def test_scale_up_is_deferred_while_the_queue_allows_then_made() -> None:
    # 2 replicas (120/s) under 130/s: the backlog grows 600 records a period. With 36000 = 300 s x 120/s of
    # deferral budget and 3 replicas still able to catch up after a pause, it waits...
    p = calibrated()
    d = p.decide(obs(2, input_rate=130, throughput=120, busy=1.0, bp=1.0, backlog=5000, growth=600), ctx())
    assert d.target == 2
    assert "deferring" in d.reason
    # ... until one more period would take the backlog past the budget: then 3 (180/s) drains it after its pause.
    d = p.decide(obs(2, input_rate=130, throughput=120, busy=1.0, bp=1.0, backlog=36000, growth=600), ctx())
    assert d.target == 3


def test_a_large_rise_costs_one_pause() -> None:
    # 2 replicas under 400/s, no deferral: the smallest m whose backlog after a 120 s pause (48000) falls to
    # within 30 s of its capacity by the 2400 s horizon is 7 (420/s); 6 (360/s) never catches up.
    o = obs(2, input_rate=400, throughput=120, busy=1.0, bp=1.0, backlog=0, growth=16800)
    assert calibrated(defer=False).decide(o, ctx()).target == 7
    assert make_policy("gesscale").decide(o, ctx()).target == 3  # Gesscale: one replica per pause
    # Nothing fits (600/s > 8 x 60/s): n_max.
    o = obs(2, input_rate=600, throughput=120, busy=1.0, bp=1.0, backlog=0, growth=28800)
    assert calibrated(defer=False).decide(o, ctx()).target == 8


def test_beyond_the_sizes_measured_scale_out_is_sublinear() -> None:
    # Measured: 120/s at n = 2. Input 230/s: linear extrapolation says 4 replicas (240/s); with beta_prior 0.8,
    # C(4) = 120 x 2^0.8 = 209/s < 230/s, so it takes 5 (120 x 2.5^0.8 = 250/s).
    o = obs(2, input_rate=230, throughput=120, busy=1.0, bp=1.0, backlog=0, growth=6600)
    assert calibrated(defer=False).decide(o, ctx()).target == 4
    assert calibrated(defer=False, beta_prior=0.8).decide(o, ctx()).target == 5


def test_scale_down_waits_for_the_payback_time() -> None:
    # 3 replicas for 100/s: 2 (120/s) absorb the 12000 records of their own pause within the 240 s + 120 s
    # budget; payback 0.5 x 2 x 120 s / 1 = 120 s, i.e. two 60 s periods of surplus. 1 replica never fits.
    p = calibrated()
    targets = [p.decide(obs(3, t=60.0 * i, input_rate=100, throughput=100, busy=100 / 180), ctx()).target
               for i in range(1, 3)]
    assert targets == [3, 2]


def test_a_scale_down_that_would_leave_a_lingering_queue_is_refused() -> None:
    # 3 replicas for 59/s. 1 replica (60/s) absorbs its own 120 s pause within the budget (7 080 records <= 360 s
    # of 60/s) but then drains at 1/s: an hour after the pause 3 480 records still wait (> F = 30 s of 60/s), so
    # a run ending then would finish late. By default only 2 replicas are taken (after their payback time, 120 s);
    # without the drain check (down_drain_s=0) 1 is taken at once.
    def targets(p: object) -> list[int]:
        return [p.decide(obs(3, t=60.0 * i, input_rate=59, throughput=59, busy=59 / 180), ctx()).target  # type: ignore[attr-defined]
                for i in range(1, 3)]

    assert targets(calibrated()) == [3, 2]
    assert targets(calibrated(down_drain_s=0))[0] == 1


def test_a_known_input_end_is_drained_soon_after() -> None:
    # 3 replicas (180/s) for 150/s with 40 000 records queued: drained in 1 333 s, within the 2400 s horizon, so
    # an unbounded stream rides it out. If the input ends in 600 s, 22 000 records would remain then (122 s of
    # work > the 30 s end budget); 4 replicas after their 120 s pause leave 14 800 (62 s), 5 leave none: 5.
    o = obs(3, t=600.0, input_rate=150, throughput=180, busy=1.0, bp=1.0, backlog=40000, growth=-1800)
    assert calibrated(defer=False).decide(o, ctx()).target == 3
    assert calibrated(defer=False).decide(o, ctx(input_end_s=1200.0)).target == 5
    assert calibrated(defer=False, plan_to_end=False).decide(o, ctx(input_end_s=1200.0)).target == 3
    # With deferral (the default) it waits a period first: 5 replicas still make it from there.
    d = calibrated().decide(o, ctx(input_end_s=1200.0))
    assert (d.target, "deferring" in d.reason) == (3, True)
    # An end beyond the horizon changes nothing.
    assert calibrated(defer=False).decide(o, ctx(input_end_s=600.0 + 3000.0)).target == 3


def test_when_the_input_ends_before_a_pause_would_pay_off_it_drains_where_it_is() -> None:
    # The input ends in 30 s with 20 000 records queued at 3 replicas: 106 s of work after the end. Any scale-up
    # pauses 120 s, 90 s past the end, and 8 replicas then still need 51 s: staying finishes first.
    o = obs(3, t=600.0, input_rate=150, throughput=180, busy=1.0, bp=1.0, backlog=20000, growth=-1800)
    d = calibrated().decide(o, ctx(input_end_s=630.0))
    assert d.target == 3
    assert "input ends" in d.reason


def with_rates(p, rates: list[float]):  # type: ignore[no-untyped-def]
    """`p` after seeing these input rates, one per period before the one it decides on (which adds its own)."""
    for r in rates:
        p.trend.update(r)
    return p


def test_a_steady_fall_is_ridden_on_the_queue_and_shed_early() -> None:
    falling = [245.0 - 5 * i for i in range(9)]  # -5/s a period, down to 205/s; then the 200/s of this period
    # 3 replicas (180/s) under 200/s: at the period's rate the queue grows 20/s for good, so (without deferral)
    # 4 replicas; following the fall, the input is under 180/s in 4 periods and the 2 400-record bump is ridden.
    o = obs(3, input_rate=200, throughput=180, busy=1.0, bp=1.0, backlog=0, growth=1200)
    assert with_rates(calibrated(defer=False, fall_weight=0.0), falling).decide(o, ctx()).target == 4
    d = with_rates(calibrated(defer=False), falling).decide(o, ctx())
    assert (d.target, d.reason) == (3, "steady")
    # 4 replicas for 150/s falling by 5 a period: at the period's rate 2 (120/s) never catch up, and 3 wait their
    # payback time (180 s); following the fall, 2 ride out their pause's queue (peak about 21 000 records, within
    # the 360 s budget of 43 200) and drain it, and their payback time (60 s) has passed: 2 at once.
    falling = [195.0 - 5 * i for i in range(9)]
    o = obs(4, input_rate=150, throughput=150, busy=150 / 240)
    assert with_rates(calibrated(fall_weight=0.0), falling).decide(o, ctx()).target == 4
    assert with_rates(calibrated(), falling).decide(o, ctx()).target == 2


def test_a_rise_or_a_jumpy_input_is_taken_at_the_period_s_rate() -> None:
    # A rise is not followed: at 170/s rising by 10 a period, 3 replicas (180/s) stay.
    o = obs(3, input_rate=170, throughput=170, busy=170 / 180)
    assert with_rates(calibrated(), [80.0 + 10 * i for i in range(9)]).decide(o, ctx()).target == 3
    # Jumps whose least-squares line falls (-3.5 a period, followed that would keep 3 replicas) but with a standard
    # error of 5.4: no significant trend, so the decision at the period's rate, 4 (without deferral).
    jumps = [270.0, 150.0, 250.0, 160.0, 240.0, 150.0, 230.0, 140.0, 220.0]  # then 200
    o = obs(3, input_rate=200, throughput=180, busy=1.0, bp=1.0, backlog=0, growth=1200)
    assert with_rates(calibrated(defer=False), jumps).decide(o, ctx()).target == 4
    assert with_rates(calibrated(defer=False, trend_t=0.0), jumps).decide(o, ctx()).target == 3


def test_large_surplus_is_shed_at_once() -> None:
    # 6 replicas for 100/s: straight to 2 (payback 0.5 x 2 x 120 / 4 = 30 s, met after one period).
    assert calibrated().decide(obs(6, input_rate=100, throughput=100, busy=100 / 360), ctx()).target == 2


def test_no_scale_down_with_a_backlog_while_paused_or_in_warmup() -> None:
    p = calibrated()
    # The input has stopped but 5000 records wait: a scale-down's pause would only delay the end.
    assert p.decide(obs(6, input_rate=0, throughput=360, busy=1.0, backlog=5000, growth=-21600), ctx()).target == 6
    assert p.decide(obs(6, input_rate=100, throughput=100, busy=0.3), ctx(since=120)).target == 6
    d = p.decide(obs(6, input_rate=100, throughput=50, busy=0.3, paused_s=30.0), ctx())
    assert d.target == 6
    assert "paused" in d.reason


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
    p = with_rates(calibrated(), [130.0, 120.0, 110.0, 105.0])
    p.decide(obs(3, input_rate=100, throughput=100, busy=100 / 180), ctx())
    q = make_policy("gesscale-plus", trend_window=4)
    q.load_state_dict(p.state_dict())
    assert (q.trend.window, q.trend.rates) == (4, [120.0, 110.0, 105.0, 100.0])  # this policy's window
    assert q.model.predict(5, 10.0) == pytest.approx(p.model.predict(5, 10.0))
    assert q.model_summary()["pause_s"] == pytest.approx(120.0)
