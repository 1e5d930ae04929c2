"""Every seed-paper policy is registered and listed by the CLI; the Holt forecaster follows ramps; the recent
trend reports a slope only when it stands out of the noise."""

from __future__ import annotations

import pytest

from gesscale.cli import main
from gesscale.policies.base import describe_policies, make_policy
from gesscale.policies.forecast import HoltForecaster, RecentTrend
from gesscale.policies.signals import true_rate
from tests.policies.helpers import ctx, obs

ISSUE_POLICIES = ("ds2", "dhalion", "hpa-cpu", "hpa-varga", "daedalus", "flink-autoscaler", "keda-lag",
                  "spark-dra", "gesscale-plus")


def test_every_policy_is_registered_with_a_summary() -> None:
    listed = dict(describe_policies())
    for pid in ISSUE_POLICIES:
        assert pid in listed
        assert 20 < len(listed[pid]) <= 110, pid


@pytest.mark.parametrize("pid", ISSUE_POLICIES)
def test_every_policy_keeps_the_bounds(pid: str) -> None:
    p = make_policy(pid)
    hot = obs(8, input_rate=2000, throughput=480, busy=1.0, bp=1.0, backlog=10**6, growth=10**5)
    cold = obs(1, input_rate=0.0, throughput=0.0, busy=0.0)
    for o in (hot, cold):
        assert 1 <= p.decide(o, ctx()).target <= 8


def test_simulate_help_lists_every_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--scenario", "x.yaml", "--policies", "help"]) == 0
    out = capsys.readouterr().out
    for pid in ISSUE_POLICIES:
        assert pid in out


def test_unknown_policy_is_one_line_listing_the_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--policies", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "unknown policy 'nope'" in err and "gesscale-plus" in err and "ds2" in err


def test_holt_forecaster() -> None:
    flat = HoltForecaster()
    for _ in range(5):
        flat.update(100.0)
    assert flat.forecast(3) == pytest.approx(100.0)
    ramp = HoltForecaster()
    for v in (100.0, 110.0, 120.0, 130.0, 140.0, 150.0):
        ramp.update(v)
    assert ramp.forecast(0) < 150.0 < ramp.forecast(3)  # the level lags; the trend projects it forward
    assert ramp.peak(3) == ramp.forecast(3)
    assert HoltForecaster().forecast(2) == 0.0
    assert HoltForecaster.from_dict(ramp.to_dict()).forecast(2) == pytest.approx(ramp.forecast(2))


def test_true_rate() -> None:
    assert true_rate(obs(2, throughput=100, busy=0.5)) == pytest.approx(200.0)
    assert true_rate(obs(2, throughput=100, busy=None, cpu=None)) is None
    assert true_rate(obs(2, throughput=1, busy=0.01)) is None  # too idle to tell


@pytest.mark.parametrize("pid", ISSUE_POLICIES)
def test_state_survives_a_json_round_trip(pid: str) -> None:
    import json

    p = make_policy(pid)
    for i in range(1, 6):
        p.decide(obs(3, t=60.0 * i, input_rate=150, throughput=150, busy=0.8, backlog=100.0 * i, growth=100.0), ctx())
    state = json.loads(json.dumps(p.state_dict()))
    q = make_policy(pid)
    q.load_state_dict(state)
    assert json.loads(json.dumps(q.state_dict())) == state


def trend_of(rates: list[float], **kw: float) -> float:
    t = RecentTrend(**kw)  # type: ignore[arg-type]
    for r in rates:
        t.update(r)
    return t.slope()


def test_recent_trend_reports_a_steady_fall_and_ignores_jumps() -> None:
    # A clean ramp: its slope per period, exactly.
    assert trend_of([100.0 - 5 * i for i in range(10)]) == pytest.approx(-5.0)
    # A slight fall inside large jumps: least squares gives -1.42 a period, but with a standard error of 2.49,
    # so it is not counted at t >= 2; it is with no test (t_min 0).
    jumps = [100.0, 140.0, 90.0, 135.0, 95.0, 120.0, 80.0, 130.0, 85.0, 110.0]
    assert trend_of(jumps) == 0.0
    assert trend_of(jumps, t_min=0.0) == pytest.approx(-1.42, abs=0.01)
    # Noise around a fall is fine when the fall dominates.
    assert trend_of([100.0 - 5 * i + (2 if i % 2 else -2) for i in range(10)]) == pytest.approx(-5.0, abs=0.3)
    # Fewer than four rates say nothing; only the last `window` count.
    assert trend_of([100.0, 90.0, 80.0]) == 0.0
    assert trend_of([0.0] * 5 + [50.0 + 5 * i for i in range(10)]) == pytest.approx(5.0)
    assert len(RecentTrend(window=4).update(1).update(2).update(3).update(4).update(5).rates) == 4


def test_recent_trend_round_trip() -> None:
    t = RecentTrend(window=6, t_min=1.5)
    for r in (10.0, 8.0, 7.0, 5.0, 4.0):
        t.update(r)
    u = RecentTrend.from_dict(t.to_dict())
    assert (u.window, u.t_min, u.rates, u.slope()) == (6, 1.5, t.rates, t.slope())
