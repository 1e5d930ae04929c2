"""Gesscale's performance model of an operator's maximum sustainable throughput (MST).

    MST(n, ND_max) = alpha * n**beta - gamma * ND_max

n is the number of replicas and ND_max (ms) the largest RTT among the nodes that host them (Arkian et al.,
ICCCN 2021, eq. 3). The model is calibrated progressively from measurements (n, ND_max, MST) taken whenever
the operator is the root of back pressure (its throughput is then its MST):

- 1 measurement fits alpha (beta = 1, gamma = 0): alpha = MST / n;
- 2 measurements fit alpha and gamma (beta = 1) by solving the 2x2 linear system;
- 3 or more fit alpha, beta, gamma by bounded non-linear least squares (alpha > 0, 0 < beta <= 1.5,
  gamma >= 0).

When the measurements cannot identify a parameter (all ND_max equal: gamma; all n equal: alpha vs beta) the
simpler model is kept (see `fit`). Estimator-style (scikit-learn convention): hyper-parameters in the
constructor, `fit` returns self, learned values in `alpha_`, `beta_`, `gamma_`. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

BETA_BOUNDS = (1e-3, 1.5)


@dataclass(frozen=True)
class Measurement:
    """One observed MST: replicas `n`, their ND_max in ms, and the throughput (records/s) they sustained."""

    n: int
    nd_max_ms: float
    mst: float

    def to_dict(self) -> dict[str, float]:
        """JSON form."""
        return {"n": self.n, "nd_max_ms": self.nd_max_ms, "mst": self.mst}


class PerformanceModel:
    """MST = alpha * n**beta - gamma * ND_max, calibrated from measurements (see the module docstring).

    Parameters
    ----------
    identify_tol_ms:
        ND_max values closer than this are taken as equal: gamma is then not identifiable.
    max_measurements:
        Most recent measurements kept per (n, ND_max rounded to 1 ms); older repeats are averaged away so a
        long run does not weigh one configuration above all others.
    """

    def __init__(self, identify_tol_ms: float = 1.0, max_measurements: int = 200) -> None:
        self.identify_tol_ms = identify_tol_ms
        self.max_measurements = max_measurements
        self.measurements_: list[Measurement] = []
        self.alpha_: float | None = None
        self.beta_: float = 1.0
        self.gamma_: float = 0.0
        self.n_params_: int = 0

    # -- calibration -----------------------------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        """Whether at least one measurement has been fitted."""
        return self.alpha_ is not None

    def add(self, measurement: Measurement) -> PerformanceModel:
        """Record a measurement and refit on everything recorded so far."""
        if measurement.n < 1 or measurement.mst <= 0 or measurement.nd_max_ms < 0:
            return self  # not a usable observation of capacity
        self.measurements_.append(measurement)
        if len(self.measurements_) > self.max_measurements:
            self.measurements_ = self.measurements_[-self.max_measurements :]
        return self.fit(self.measurements_)

    def fit(self, measurements: Iterable[Measurement]) -> PerformanceModel:
        """Fit alpha, beta, gamma with as many parameters as the measurements identify."""
        ms = [m for m in measurements if m.n >= 1 and m.mst > 0]
        self.measurements_ = list(ms)
        if not ms:
            self.alpha_, self.beta_, self.gamma_, self.n_params_ = None, 1.0, 0.0, 0
            return self
        pts = _group(ms)  # one averaged point per distinct configuration
        n = np.array([p[0] for p in pts], dtype=float)
        nd = np.array([p[1] for p in pts], dtype=float)
        mst = np.array([p[2] for p in pts], dtype=float)
        nd_varies = float(nd.max() - nd.min()) > self.identify_tol_ms
        n_varies = len(set(n.tolist())) > 1

        # Candidate fits, richest first; the richest one the data identifies wins.
        if len(pts) >= 3 and n_varies:
            start = (self.alpha_, self.beta_, self.gamma_) if self.n_params_ >= 2 and self.alpha_ else None
            alpha, beta, gamma = _fit_nonlinear(n, nd, mst, with_gamma=nd_varies, start=start)
            self._set(alpha, beta, gamma, 3 if nd_varies else 2)
        elif len(pts) >= 2 and nd_varies:
            alpha, gamma = _fit_linear_alpha_gamma(n, nd, mst)
            self._set(alpha, 1.0, gamma, 2)
        else:
            self._set(float(np.sum(mst * n) / np.sum(n * n)), 1.0, 0.0, 1)  # least squares of mst = alpha n
        return self

    def _set(self, alpha: float, beta: float, gamma: float, n_params: int) -> None:
        self.alpha_, self.beta_, self.gamma_, self.n_params_ = float(alpha), float(beta), float(gamma), n_params

    # -- prediction ------------------------------------------------------------------------------------
    def predict(self, n: int | float, nd_max_ms: float) -> float:
        """Predicted MST (records/s) of n replicas whose ND_max is `nd_max_ms`; 0 if not fitted or n < 1."""
        if self.alpha_ is None or n < 1:
            return 0.0
        return max(0.0, self.alpha_ * float(n) ** self.beta_ - self.gamma_ * nd_max_ms)

    # -- serialisation ---------------------------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters (scikit-learn convention)."""
        return {"identify_tol_ms": self.identify_tol_ms, "max_measurements": self.max_measurements}

    def to_dict(self) -> dict[str, Any]:
        """Everything needed to resume: hyper-parameters, measurements and the fitted values."""
        return {
            "params": self.get_params(),
            "alpha": self.alpha_,
            "beta": self.beta_,
            "gamma": self.gamma_,
            "n_params": self.n_params_,
            "measurements": [m.to_dict() for m in self.measurements_],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerformanceModel:
        """Rebuild a model written by `to_dict` (refits from the measurements when there are any)."""
        model = cls(**data.get("params", {}))
        ms = [Measurement(int(m["n"]), float(m["nd_max_ms"]), float(m["mst"])) for m in data.get("measurements", [])]
        if ms:
            model.fit(ms)
        elif data.get("alpha") is not None:
            model._set(data["alpha"], data.get("beta", 1.0), data.get("gamma", 0.0), int(data.get("n_params", 3)))
        return model

    def __repr__(self) -> str:
        if self.alpha_ is None:
            return "PerformanceModel(unfitted)"
        return (
            f"PerformanceModel(alpha={self.alpha_:.4g}, beta={self.beta_:.4g}, gamma={self.gamma_:.4g}, "
            f"points={len(self.measurements_)})"
        )


def _group(ms: Sequence[Measurement]) -> list[tuple[int, float, float]]:
    """Average repeated measurements of the same configuration (n, ND_max rounded to 0.1 ms)."""
    groups: dict[tuple[int, float], list[Measurement]] = {}
    for m in ms:
        groups.setdefault((m.n, round(m.nd_max_ms, 1)), []).append(m)
    return [
        (n, sum(m.nd_max_ms for m in g) / len(g), sum(m.mst for m in g) / len(g)) for (n, _), g in groups.items()
    ]


def _fit_linear_alpha_gamma(n: np.ndarray, nd: np.ndarray, mst: np.ndarray) -> tuple[float, float]:
    """alpha, gamma of mst = alpha n - gamma nd (beta = 1) by least squares, gamma clipped at 0."""
    a = np.column_stack([n, -nd])
    (alpha, gamma), *_ = np.linalg.lstsq(a, mst, rcond=None)
    if gamma < 0 or alpha <= 0:  # the data says latency does not hurt: keep the one-parameter model
        return float(np.sum(mst * n) / np.sum(n * n)), 0.0
    return float(alpha), float(gamma)


def _fit_nonlinear(
    n: np.ndarray, nd: np.ndarray, mst: np.ndarray, with_gamma: bool, start: tuple[float, float, float] | None = None
) -> tuple[float, float, float]:
    """alpha, beta, gamma by bounded least squares on relative residuals (gamma fixed to 0 if unidentifiable).

    `start` warm-starts the solver from the previous fit (the analytic Jacobian keeps each refit cheap).
    """
    scale = np.maximum(mst, 1e-9)
    log_n = np.log(n)
    k = 3 if with_gamma else 2

    def residuals(x: np.ndarray) -> np.ndarray:
        g = x[2] if with_gamma else 0.0
        return (x[0] * n ** x[1] - g * nd - mst) / scale

    def jacobian(x: np.ndarray) -> np.ndarray:
        pow_n = n ** x[1]
        cols = [pow_n / scale, x[0] * pow_n * log_n / scale]
        if with_gamma:
            cols.append(-nd / scale)
        return np.column_stack(cols)

    lo = [1e-9, BETA_BOUNDS[0], 0.0][:k]
    hi = [math.inf, BETA_BOUNDS[1], math.inf][:k]
    x0 = np.array([float(np.max(mst / n)), 1.0, 0.0][:k])
    if start is not None and start[0] > 0:
        x0 = np.clip(np.array(start[:k], dtype=float), np.array(lo) + 1e-12, np.array(hi))
        x0[1] = min(x0[1], BETA_BOUNDS[1] - 1e-9)
    res = least_squares(residuals, x0, jac=jacobian, bounds=(lo, hi), xtol=1e-12, ftol=1e-12)
    return float(res.x[0]), float(res.x[1]), float(res.x[2]) if with_gamma else 0.0
