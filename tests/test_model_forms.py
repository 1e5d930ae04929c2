"""The performance model's forms: each fit recovers its parameters, and `auto` tells the forms apart by
leave-one-out error (docs/calibration.md, "Model forms")."""

from __future__ import annotations

import numpy as np
import pytest

from gesscale.model import FORMS, MIN_POINTS_AUTO, Measurement, PerformanceModel
from gesscale.scenario import GroundTruth

# Configurations as a calibration measures them: n = 1, then near, middle and far placements of n = 2..4.
CONFIGS = [(1, 0.0), (2, 5.0), (2, 25.0), (2, 45.0), (3, 10.0), (3, 30.0), (3, 50.0), (4, 12.0), (4, 35.0),
           (4, 55.0)]
# Per form: alpha, beta and its latency parameter, chosen so that the far placements lose 20-45 % (the size
# of the effect measured live), as in docs/testbed.md.
TRUE = {"paper": (600.0, 0.7, 4.0), "per-replica": (600.0, 0.7, 1.5), "proportional": (600.0, 0.7, 0.006),
        "per-batch": (600.0, 0.7, 6.0)}


def truth_of(form: str) -> GroundTruth:
    alpha, beta, latency = TRUE[form]
    key = "delta" if FORMS[form].latency_param == "delta" else "gamma"
    return GroundTruth(alpha=alpha, beta=beta, form=form, **{"gamma": 0.0, "delta": 0.0, key: latency})


def noisy_points(form: str, seed: int, noise: float = 0.02, repeats: int = 2) -> list[Measurement]:
    """Each configuration measured `repeats` times with a relative noise of `noise` (one standard deviation)."""
    rng = np.random.default_rng(seed)
    truth = truth_of(form)
    return [Measurement(n, nd, truth.mst(n, nd) * (1 + rng.normal(0, noise))) for n, nd in CONFIGS
            for _ in range(repeats)]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_form_recovers_its_parameters_from_noisy_points(form: str, seed: int) -> None:
    m = PerformanceModel(form=form).fit(noisy_points(form, seed))
    alpha, beta, latency = TRUE[form]
    assert m.form_ == form and m.n_params_ == 3
    assert m.alpha_ == pytest.approx(alpha, rel=0.05)
    assert m.beta_ == pytest.approx(beta, rel=0.05)
    got = m.delta_ if FORMS[form].latency_param == "delta" else m.gamma_
    assert got == pytest.approx(latency, rel=0.15)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_leave_one_out_picks_the_true_form(form: str, seed: int) -> None:
    """With 1 % noise the choice was right in 153 of 160 seeded draws (seeds 1-40 per form; the misses are between
    `per-replica` and its neighbours `per-batch` and `proportional`), with 2 % in 134 and with 5 % in 83: the seeds
    here are fixed, the rates are in docs/calibration.md."""
    m = PerformanceModel(form="auto").fit(noisy_points(form, seed, noise=0.01))
    loo = m.loo_errors()
    assert m.form_ == form, {f: round(loo[f]["rms"], 4) for f in loo}
    assert set(loo) == set(FORMS)
    assert loo[form]["rms"] == min(v["rms"] for v in loo.values())
    assert len(loo[form]["errors"]) == len(CONFIGS)


def test_the_true_form_predicts_the_far_placement_better_than_the_paper() -> None:
    points = noisy_points("per-replica", 4)
    far = (4, 55.0)
    truth = truth_of("per-replica").mst(*far)
    train = [p for p in points if (p.n, p.nd_max_ms) != far]
    paper = PerformanceModel(form="paper").fit(train).predict(*far)
    per_replica = PerformanceModel(form="per-replica").fit(train).predict(*far)
    assert abs(per_replica - truth) / truth < 0.05 < abs(paper - truth) / truth


def test_auto_keeps_the_paper_form_until_there_are_enough_configurations() -> None:
    points = [p for p in noisy_points("per-replica", 1, repeats=1)][: MIN_POINTS_AUTO - 1]
    m = PerformanceModel(form="auto").fit(points)
    assert m.form_ == "paper"
    assert f"{MIN_POINTS_AUTO} needed" in m.form_reason_
    m.add(noisy_points("per-replica", 1, repeats=1)[MIN_POINTS_AUTO - 1])
    assert "leave-one-out" in m.form_reason_


def test_auto_keeps_the_paper_form_when_nd_max_never_varies() -> None:
    points = [Measurement(n, 10.0, 500 * n**0.8) for n in (1, 2, 3, 4, 5, 6)]
    m = PerformanceModel(form="auto").fit(points)
    assert m.form_ == "paper" and "never varies" in m.form_reason_


def test_use_form_refits_and_the_dict_round_trip_keeps_form_and_predictions() -> None:
    m = PerformanceModel().fit(noisy_points("proportional", 5))
    assert m.form_ == "paper"
    m.use_form("proportional")
    assert m.form_ == "proportional" and m.delta_ > 0 and m.gamma_ == 0.0
    back = PerformanceModel.from_dict(m.to_dict())
    assert back.form == "proportional" and back.form_ == "proportional"
    assert back.predict(3, 30.0) == pytest.approx(m.predict(3, 30.0))
    frozen = m.frozen()
    assert frozen.measurements_ == [] and frozen.predict(3, 30.0) == pytest.approx(m.predict(3, 30.0))
    assert set(m.to_dict()["loo"]) == set(FORMS)


@pytest.mark.parametrize("form", list(FORMS))
def test_two_points_fit_the_linear_system_of_each_form(form: str) -> None:
    truth = truth_of(form)
    truth = GroundTruth(alpha=truth.alpha, beta=1.0, gamma=truth.gamma, delta=truth.delta, form=form)
    m = PerformanceModel(form=form).fit([Measurement(2, 10.0, truth.mst(2, 10.0)),
                                         Measurement(3, 50.0, truth.mst(3, 50.0))])
    assert m.n_params_ == 2 and m.beta_ == 1.0
    assert m.predict(4, 30.0) == pytest.approx(truth.mst(4, 30.0), rel=1e-9)


def test_unknown_form_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown model form"):
        PerformanceModel(form="quadratic")
