"""Performance model: progressive calibration and the closed forms (docs/controller.md)."""

from __future__ import annotations

import pytest

from gesscale.model import Measurement, PerformanceModel


def truth(n: int, nd: float, alpha: float = 60.0, beta: float = 0.85, gamma: float = 0.12) -> float:
    return alpha * n**beta - gamma * nd


def test_unfitted_predicts_zero() -> None:
    assert PerformanceModel().predict(3, 10) == 0.0


def test_one_point_gives_alpha_only() -> None:
    m = PerformanceModel().add(Measurement(2, 40.0, 110.0))
    assert m.alpha_ == pytest.approx(55.0)
    assert (m.beta_, m.gamma_, m.n_params_) == (1.0, 0.0, 1)
    assert m.predict(4, 80) == pytest.approx(220.0)


def test_two_points_match_closed_form_alpha_gamma() -> None:
    # 100 = 2a - 20g ; 130 = 3a - 60g  ->  a = (100*60 - 130*20) / (2*60 - 3*20) = 3400/60, g = (2a - 100)/20
    m = PerformanceModel().fit([Measurement(2, 20.0, 100.0), Measurement(3, 60.0, 130.0)])
    a = 3400 / 60
    g = (2 * a - 100) / 20
    assert m.n_params_ == 2
    assert m.alpha_ == pytest.approx(a, rel=1e-9)
    assert m.gamma_ == pytest.approx(g, rel=1e-9)
    assert m.beta_ == 1.0


def test_two_points_with_equal_nd_keep_one_parameter() -> None:
    m = PerformanceModel().fit([Measurement(1, 10.0, 60.0), Measurement(2, 10.0, 110.0)])
    assert m.n_params_ == 1 and m.gamma_ == 0.0
    assert m.alpha_ == pytest.approx((60 * 1 + 110 * 2) / 5)  # least squares of mst = alpha n


@pytest.mark.parametrize("points", [
    [(1, 0.0), (2, 10.0), (4, 50.0)],
    [(2, 5.0), (3, 120.0), (5, 40.0), (6, 200.0), (8, 260.0)],
])
def test_three_or_more_noiseless_points_recover_parameters_within_2pct(points: list[tuple[int, float]]) -> None:
    ms = [Measurement(n, nd, truth(n, nd)) for n, nd in points]
    m = PerformanceModel().fit(ms)
    assert m.n_params_ == 3
    assert m.alpha_ == pytest.approx(60.0, rel=0.02)
    assert m.beta_ == pytest.approx(0.85, rel=0.02)
    assert m.gamma_ == pytest.approx(0.12, rel=0.02)


def test_unidentifiable_gamma_falls_back_to_alpha_beta() -> None:
    ms = [Measurement(n, 30.0, 60.0 * n**0.8) for n in (1, 2, 4)]
    m = PerformanceModel().fit(ms)
    assert m.n_params_ == 2 and m.gamma_ == 0.0
    assert m.beta_ == pytest.approx(0.8, rel=0.02)


def test_serialisation_round_trip_keeps_measurements_and_fit() -> None:
    ms = [Measurement(n, nd, truth(n, nd)) for n, nd in [(1, 0.0), (3, 40.0), (5, 90.0)]]
    m = PerformanceModel().fit(ms)
    back = PerformanceModel.from_dict(m.to_dict())
    assert back.measurements_ == m.measurements_
    assert back.predict(4, 33.0) == pytest.approx(m.predict(4, 33.0))


def test_unusable_measurements_are_ignored() -> None:
    m = PerformanceModel().add(Measurement(0, 0.0, 10.0)).add(Measurement(2, 0.0, 0.0))
    assert not m.is_fitted
