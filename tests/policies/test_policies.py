"""Gesscale's Algorithms 1-4 and the paper's baselines on hand-made observations."""

from __future__ import annotations

import pytest

from gesscale.errors import UserError
from gesscale.model import Measurement, PerformanceModel
from gesscale.policies.base import make_policy, parse_policy_list, place, policy_ids
from gesscale.policies.gesscale_paper import GesscalePolicy, is_root_of_back_pressure
from tests.helpers import LMAP, ctx, obs


@pytest.mark.parametrize(("bp_up", "bp_op", "root"), [
    (0.9, 0.0, True),    # upstream held back, operator free: root of back pressure
    (0.9, 0.5, True),    # BP_i exactly 0.5 still counts as not back-pressured
    (0.9, 0.8, False),   # the operator is itself back-pressured by its downstream: not the root
    (0.5, 0.0, False),   # BP_{i-1} must exceed 0.5
    (0.2, 0.9, False),
    (0.0, 0.0, False),
])
def test_algorithm1_truth_table(bp_up: float, bp_op: float, root: bool) -> None:
    assert is_root_of_back_pressure(bp_up, bp_op) is root
    p = GesscalePolicy()
    d = p.decide(obs(bp_up=bp_up, bp_op=bp_op, throughput=111.0, input_rate=150.0, growth=500.0), ctx())
    assert (d.target == 3) is root
    assert (len(p.model.measurements_) == 1) is root
    if root:
        assert p.model.measurements_[0] == Measurement(2, 2.0, 111.0)


def test_scale_up_while_catching_up_records_but_does_not_grow() -> None:
    p = GesscalePolicy()
    d = p.decide(obs(bp_up=1.0, throughput=120.0, input_rate=90.0, growth=-1800.0, backlog=5000.0), ctx())
    assert d.target == 2 and len(p.model.measurements_) == 1


def test_a_backlog_drained_within_the_period_is_no_mst_measurement() -> None:
    # Held back for most of the period, then nothing left: the throughput is what the input allowed.
    p = GesscalePolicy()
    d = p.decide(obs(bp_up=0.8, throughput=593.0, input_rate=0.0, growth=-5944.0, backlog=0.0), ctx())
    assert d.target == 2 and not p.model.measurements_


def test_no_decision_during_warmup() -> None:
    p = GesscalePolicy()
    d = p.decide(obs(bp_up=1.0, growth=10.0), ctx(since=60.0, warmup_s=180.0))
    assert d.target == 2 and d.reason == "warm-up" and not p.model.measurements_


def test_scale_up_capped_at_n_max() -> None:
    d = GesscalePolicy().decide(obs(bp_up=1.0, growth=10.0), ctx(max_replicas=2))
    assert d.target == 2


def fitted(alpha: float = 60.0) -> PerformanceModel:
    return PerformanceModel().fit([Measurement(1, 0.0, alpha)])  # MST = alpha n


def test_algorithm4_removes_several_replicas_in_one_step() -> None:
    p = GesscalePolicy(model=fitted(60.0))
    five = ("n1", "n2", "n3", "n4", "n5")
    # MST_5 = 300, CT = input = 100 -> DT = 66.7%; need 100 * 1.05 = 105 -> 2 replicas (120) suffice.
    d = p.decide(obs(five, input_rate=100.0, throughput=100.0), ctx(dt_threshold_pct=20.0, scale_down_margin=0.05))
    assert d.target == 2
    assert d.remove == ("n5", "n4", "n3")  # greatest latency first


def test_algorithm4_respects_threshold_and_n_min() -> None:
    p = GesscalePolicy(model=fitted(60.0))
    three = ("n1", "n2", "n3")
    # MST_3 = 180, CT = 150: DT = 16.7% < 20%: keep.
    assert p.decide(obs(three, input_rate=150.0, throughput=150.0), ctx()).target == 3
    # DT high but n_min = 3.
    assert p.decide(obs(three, input_rate=10.0, throughput=10.0), ctx(min_replicas=3)).target == 3


def test_algorithm4_stops_when_the_model_says_fewer_would_not_sustain() -> None:
    p = GesscalePolicy(model=fitted(60.0))
    four = ("n1", "n2", "n3", "n4")
    # MST_4 = 240, CT 170: DT 29%; need 178.5 -> 3 replicas (180) sustain, 2 (120) do not.
    d = p.decide(obs(four, input_rate=170.0, throughput=170.0), ctx())
    assert d.target == 3 and d.remove == ("n4",)


def test_model_baseline_ignores_latency() -> None:
    p = make_policy("mdl-nlunaware")
    p.decide(obs(("n1", "n6"), bp_up=1.0, throughput=90.0, growth=5.0), ctx())
    assert p.model.measurements_[0].nd_max_ms == 0.0  # type: ignore[attr-defined]
    assert p.latency_aware is False


@pytest.mark.parametrize(("cpu", "target"), [(0.95, 3), (0.91, 3), (0.9, 2), (0.5, 2), (0.49, 1), (0.1, 1)])
def test_threshold_policies(cpu: float, target: int) -> None:
    for pid in ("thr-nlunaware", "thr-nlaware"):
        assert make_policy(pid).decide(obs(cpu=cpu), ctx()).target == target


def test_place_latency_aware_vs_random() -> None:
    from gesscale.observation import Decision

    c = ctx()
    aware = place(Decision(3), ("n1", "n2"), c, latency_aware=True)
    assert aware.add == ("n3",)
    rand = place(Decision(4), ("n1", "n2"), c, latency_aware=False)
    assert len(rand.add) == 2 and not set(rand.add) & {"n1", "n2"}
    down = place(Decision(1), ("n1", "n2", "n6"), c, latency_aware=True)
    assert down.remove == ("n6", "n2") or down.remove == ("n6", "n1")


def test_oracle_and_static() -> None:
    c = ctx()
    c.oracle_demand = lambda t0, t1: 5
    assert make_policy("ideal").decide(obs(), c).target == 5
    assert make_policy("static").decide(obs(), c).target == 2
    assert make_policy("static", replicas=4).decide(obs(), c).target == 4


def test_registry_lists_paper_policies_and_rejects_unknown() -> None:
    ids = policy_ids()
    for pid in ("gesscale", "thr-nlunaware", "thr-nlaware", "mdl-nlunaware", "ideal", "static"):
        assert pid in ids
    with pytest.raises(UserError, match="unknown policy 'nope'"):
        make_policy("nope")
    with pytest.raises(UserError, match="unknown policy"):
        parse_policy_list("gesscale,nope")
    assert parse_policy_list("all") == ids


def test_gesscale_state_round_trip() -> None:
    p = GesscalePolicy(model=fitted(50.0))
    q = GesscalePolicy()
    q.load_state_dict(p.state_dict())
    assert q.model.predict(3, 0) == pytest.approx(150.0)
    assert LMAP.nd_max(("n1", "n2")) == 2


def test_no_scale_down_while_a_backlog_waits_and_is_not_shrinking() -> None:
    p = GesscalePolicy(model=fitted(60.0))
    five = ("n1", "n2", "n3", "n4", "n5")
    # A period with no throughput (a pause) and 31k records waiting: DT would be 100%, but nothing may go.
    d = p.decide(obs(five, input_rate=100.0, throughput=0.0, backlog=31_000.0, growth=6_000.0), ctx())
    assert d.target == 5 and "backlog" in d.reason
    # The same backlog being caught up (shrinking) does not block Algorithm 4.
    d = p.decide(obs(five, input_rate=100.0, throughput=100.0, backlog=31_000.0, growth=-100.0), ctx())
    assert d.target < 5
