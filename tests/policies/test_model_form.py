"""The model-based policies decide with the form the controller's `model_form` asks for (docs/calibration.md)."""

from __future__ import annotations

import pytest

from gesscale.model import Measurement, PerformanceModel
from gesscale.policies.base import make_policy
from gesscale.scenario import GroundTruth
from tests.policies.helpers import ctx, obs

TRUTH = GroundTruth(alpha=600.0, beta=0.7, gamma=1.5, form="per-replica")
CONFIGS = [(1, 0.0), (2, 5.0), (2, 25.0), (2, 45.0), (3, 10.0), (3, 30.0), (3, 50.0), (4, 12.0), (4, 55.0)]


def fitted() -> PerformanceModel:
    return PerformanceModel().fit([Measurement(n, nd, TRUTH.mst(n, nd)) for n, nd in CONFIGS])


@pytest.mark.parametrize("policy_id", ["gesscale", "gesscale-plus"])
@pytest.mark.parametrize("form,expected", [("paper", "paper"), ("auto", "per-replica"),
                                           ("proportional", "proportional")])
def test_the_policy_model_takes_the_controllers_form(policy_id: str, form: str, expected: str) -> None:
    policy = make_policy(policy_id)
    policy.model = fitted()
    policy.decide(obs(2, throughput=100.0, input_rate=100.0, busy=0.05), ctx(model_form=form))  # no measurement
    assert policy.model.form_ == expected
    summary = policy.model_summary()
    assert summary["form"] == expected
    assert bool(summary["loo_rms"]) == (form == "auto")


def test_the_scale_down_check_predicts_with_the_chosen_form() -> None:
    """Two replicas at ND_max 10 ms under a light input: the decision's 'fewer would not sustain' or 'model says'
    rests on the model's prediction for one replica, which the per-replica form gets right (600/s)."""
    policy = make_policy("gesscale")
    policy.model = fitted()
    decision = policy.decide(obs(2, throughput=560.0, input_rate=560.0), ctx(model_form="auto"))
    assert policy.model.predict(1, 0.0) == pytest.approx(600.0, rel=1e-3)
    assert decision.target == 1 and "model says 1 sustain" in decision.reason
