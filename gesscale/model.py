"""Gesscale's performance model of an operator's maximum sustainable throughput (MST), in several forms.

n is the number of replicas and ND_max (ms) the largest RTT among the nodes that host them. The forms (`FORMS`):

- `paper`:        MST = alpha * n**beta - gamma * ND_max          (Arkian et al., ICCCN 2021, eq. 3)
- `per-replica`:  MST = alpha * n**beta - gamma * n * ND_max      (each replica pays the latency every batch)
- `proportional`: MST = alpha * n**beta * (1 - delta * ND_max)    (latency costs a share of the capacity)
- `per-batch`:    MST = 1 / (1 / (alpha * n**beta) + 1e-6 * gamma * ND_max)
                  (each micro-batch, capped at a number of rows, pays its round trips once: the time per record is
                  the compute time per record plus gamma microseconds per ms of ND_max)

The first three are `alpha n^beta - c h(n, ND_max, beta)` with c >= 0 (for `proportional`, c = alpha delta and
h = n^beta ND_max), so one fit serves them; `per-batch` adds times, not rates (`ModelForm.harmonic`).

The model is calibrated progressively from measurements (n, ND_max, MST) taken whenever the operator is the root
of back pressure (its throughput is then its MST):

- 1 measurement fits alpha (beta = 1, no latency term): alpha = MST / n;
- 2 measurements fit alpha and c (beta = 1) by solving the 2x2 linear system (`per-batch`: in times per record);
- 3 or more fit alpha, beta, c by bounded non-linear least squares on relative residuals (alpha > 0,
  0 < beta <= 1.5, c >= 0).

When the measurements cannot identify a parameter (all ND_max equal: c; all n equal: alpha vs beta) the simpler
model is kept (see `fit`). The form is a hyper-parameter: a name of `FORMS`, or `auto`, which chooses the form
with the smallest leave-one-out error (`loo_errors`) over the distinct configurations measured, once there are
at least `MIN_POINTS_AUTO` of them (two more than a form's three parameters) with both n and ND_max varying;
with fewer the forms cannot be told apart and the paper's is used (`form_reason_` says which case holds).

Estimator-style (scikit-learn convention): hyper-parameters in the constructor, `fit` returns self, learned
values in `form_`, `alpha_`, `beta_`, `gamma_`, `delta_`. No I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BETA_BOUNDS = (1e-3, 1.5)
HARMONIC_UNIT = 1e-6  # the per-batch form's gamma is in microseconds of time per record per ms of ND_max
PAPER = "paper"
AUTO = "auto"
# What a model's `nd_max_ms` stands for (its `latency`, the controller's `model_latency`): ND_max, or the farthest
# replica's RTT to the site (`gesscale.site_view`); the forms take either the same way.
MODEL_LATENCIES = ("nd_max", "site")


@dataclass(frozen=True)
class ModelForm:
    """One closed form of MST(n, ND_max): its name, formula, and the latency basis h of alpha n^beta - c h."""

    name: str
    formula: str
    latency_param: str  # the parameter the form reports: "gamma" (c itself) or "delta" (c / alpha)
    basis: Callable[[Any, Any, Any], Any]  # h(n, nd, n**beta)
    basis_grows_with_beta: bool = False  # h depends on beta (its derivative enters the Jacobian)
    harmonic: bool = False  # 1/MST = 1/(alpha n^beta) + HARMONIC_UNIT c h: times per record add up

    def describe(self, alpha: float, beta: float, latency: float) -> str:
        """The fitted formula with its numbers, for a table's title or a log line."""
        base = f"{alpha:.1f}·n^{beta:.2f}"
        if self.harmonic:
            return f"1 / (1/({base}) + {latency:.3g}e-6·ND_max)"
        if self.latency_param == "delta":
            return f"{base}·(1 − {latency:.5f}·ND_max)"
        return f"{base} − {latency:.3f}·{'n·' if self.name == 'per-replica' else ''}ND_max"

    def mst(self, alpha: float, beta: float, latency: float, n: float, nd_max_ms: float) -> float:
        """MST (records/s, at least 0) with the form's own parameters (gamma or delta as `latency`)."""
        if n < 1:
            return 0.0
        if self.name == PAPER:  # kept exactly as the paper's model always computed it
            return max(0.0, alpha * float(n) ** beta - latency * nd_max_ms)
        pow_n = float(n) ** beta
        if self.harmonic:
            capacity = alpha * pow_n
            if capacity <= 0:
                return 0.0
            return capacity / (1.0 + HARMONIC_UNIT * latency * self.basis(float(n), nd_max_ms, pow_n) * capacity)
        c = latency * alpha if self.latency_param == "delta" else latency
        return max(0.0, alpha * pow_n - c * self.basis(float(n), nd_max_ms, pow_n))


FORMS: dict[str, ModelForm] = {f.name: f for f in (
    ModelForm(PAPER, "alpha n^beta - gamma ND_max", "gamma", lambda n, nd, pow_n: nd),
    ModelForm("per-replica", "alpha n^beta - gamma n ND_max", "gamma", lambda n, nd, pow_n: n * nd),
    ModelForm("proportional", "alpha n^beta (1 - delta ND_max)", "delta", lambda n, nd, pow_n: pow_n * nd,
              basis_grows_with_beta=True),
    ModelForm("per-batch", "1 / (1/(alpha n^beta) + 1e-6 gamma ND_max)", "gamma", lambda n, nd, pow_n: nd,
              harmonic=True),
)}
FORM_CHOICES = (PAPER, AUTO, *(f for f in FORMS if f != PAPER))
FORM_PARAMS = 3  # alpha, beta and the latency coefficient, in every form
MIN_POINTS_AUTO = FORM_PARAMS + 2  # distinct configurations `auto` needs before it chooses by leave-one-out


def check_form(form: str, allow_auto: bool = True) -> str:
    """The form name, or ValueError naming the choices."""
    choices = FORM_CHOICES if allow_auto else tuple(FORMS)
    if form not in choices:
        raise ValueError(f"unknown model form {form!r}; expected one of {', '.join(choices)}")
    return form


@dataclass(frozen=True)
class Measurement:
    """One observed MST: replicas `n`, their ND_max in ms, and the throughput (records/s) they sustained."""

    n: int
    nd_max_ms: float
    mst: float

    def to_dict(self) -> dict[str, float]:
        """JSON form."""
        return {"n": self.n, "nd_max_ms": self.nd_max_ms, "mst": self.mst}


@dataclass(frozen=True)
class _Fit:
    """One form fitted on some points: alpha, beta, the latency coefficient c, and how many were free."""

    form: str
    alpha: float
    beta: float
    c: float
    n_params: int

    def predict(self, n: float, nd: float) -> float:
        f = FORMS[self.form]
        return f.mst(self.alpha, self.beta, self.latency, n, nd)

    @property
    def latency(self) -> float:
        """gamma, or delta = c / alpha for the proportional form."""
        if FORMS[self.form].latency_param == "delta":
            return self.c / self.alpha if self.alpha > 0 else 0.0
        return self.c


class PerformanceModel:
    """MST(n, ND_max) in one of `FORMS` (or `auto`), calibrated from measurements (see the module docstring).

    Parameters
    ----------
    identify_tol_ms:
        ND_max values closer than this are taken as equal: the latency term is then not identifiable.
    max_measurements:
        Most recent measurements kept per (n, ND_max rounded to 1 ms); older repeats are averaged away so a
        long run does not weigh one configuration above all others.
    form:
        A name of `FORMS`, or `auto`: the form with the smallest leave-one-out error once the data can tell.
    latency:
        What the measurements' `nd_max_ms` stand for (`MODEL_LATENCIES`): `nd_max`, or `site` (the farthest
        replica's RTT to the site). A label: the fit is the same; a controller refuses a model in another latency.
    """

    def __init__(self, identify_tol_ms: float = 1.0, max_measurements: int = 200, form: str = PAPER,
                 latency: str = "nd_max") -> None:
        self.identify_tol_ms = identify_tol_ms
        self.max_measurements = max_measurements
        self.form = check_form(form)
        if latency not in MODEL_LATENCIES:
            raise ValueError(f"unknown model latency {latency!r}; expected one of {', '.join(MODEL_LATENCIES)}")
        self.latency = latency
        self.measurements_: list[Measurement] = []
        self.form_: str = PAPER
        self.form_reason_: str = "no measurement"
        self.alpha_: float | None = None
        self.beta_: float = 1.0
        self.gamma_: float = 0.0
        self.delta_: float = 0.0
        self.n_params_: int = 0
        self._c: float = 0.0
        self._loo: dict[str, dict[str, Any]] | None = None
        self.chosen_by_loo_: bool = False  # `auto` chose the form by leave-one-out error (enough configurations)

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

    def use_form(self, form: str) -> PerformanceModel:
        """Switch the requested form (the controller's `model_form`) and refit when it changed."""
        if check_form(form) != self.form:
            self.form = form
            self.fit(self.measurements_)
        return self

    def use_latency(self, latency: str) -> PerformanceModel:
        """Take the controller's `model_latency`: set it on a model without measurements; ValueError when the
        measurements are in another latency (their points would be read as what they are not)."""
        if latency != self.latency:
            if self.measurements_ or self.alpha_ is not None:
                raise ValueError(f"the model's points are in latency {self.latency!r}, the controller's "
                                 f"model_latency is {latency!r}: calibrate with the same latency, or set "
                                 f"model_latency {self.latency}")
            if latency not in MODEL_LATENCIES:
                raise ValueError(f"unknown model latency {latency!r}; expected one of {', '.join(MODEL_LATENCIES)}")
            self.latency = latency
        return self

    def fit(self, measurements: Iterable[Measurement]) -> PerformanceModel:
        """Fit the requested form (or choose one, `auto`) with as many parameters as the measurements identify."""
        ms = [m for m in measurements if m.n >= 1 and m.mst > 0]
        self.measurements_ = list(ms)
        self._loo = None
        if not ms:
            self.alpha_, self.beta_, self.gamma_, self.delta_, self.n_params_ = None, 1.0, 0.0, 0.0, 0
            self._c, self.form_, self.form_reason_, self.chosen_by_loo_ = 0.0, PAPER, "no measurement", False
            return self
        pts = _group(ms)  # one averaged point per distinct configuration
        form, self.form_reason_ = self.form, f"{self.form}: as requested"
        self.chosen_by_loo_ = False
        if self.form == AUTO:
            form, self.form_reason_ = self._choose(pts)
            self.chosen_by_loo_ = bool(self._loo)
        start = None
        if form == self.form_ and self.n_params_ >= 2 and self.alpha_:
            start = (self.alpha_, self.beta_, self._c)  # warm start from the previous fit of the same form
        self._apply(_fit_form(form, pts, self.identify_tol_ms, start))
        return self

    def _choose(self, pts: list[tuple[int, float, float]]) -> tuple[str, str]:
        """`auto`: the form with the smallest root-mean-square leave-one-out error (the paper's on a tie)."""
        n_varies = len({p[0] for p in pts}) > 1
        nd = [p[1] for p in pts]
        nd_varies = max(nd) - min(nd) > self.identify_tol_ms
        if len(pts) < MIN_POINTS_AUTO or not (n_varies and nd_varies):
            why = (f"{len(pts)} configuration(s), {MIN_POINTS_AUTO} needed" if len(pts) < MIN_POINTS_AUTO
                   else "n or ND_max never varies")
            return PAPER, f"auto: {why} to tell the forms apart; the paper's form"
        loo = self.loo_errors()
        best = min(FORMS, key=lambda f: (round(loo[f]["rms"], 12), list(FORMS).index(f)))
        return best, (f"auto: smallest leave-one-out error over {len(pts)} configurations "
                      f"(rms {loo[best]['rms']:.1%})")

    def loo_errors(self) -> dict[str, dict[str, Any]]:
        """Each form's leave-one-out errors over the distinct configurations measured: every configuration in
        turn is left out, the form fitted on the others and its prediction compared with what was measured.
        Per form: `errors` ((predicted - measured) / measured, in the order of `points`), `median_abs`, `max_abs`
        and `rms` of them, and `points` (n, ND_max, MST). Empty with fewer than 3 configurations."""
        if self._loo is None:
            pts = _group(self.measurements_)
            self._loo = {}
            if len(pts) >= 3:
                for name in FORMS:
                    errs = []
                    for i, (n, nd, mst) in enumerate(pts):
                        fit = _fit_form(name, pts[:i] + pts[i + 1 :], self.identify_tol_ms, None)
                        errs.append((fit.predict(n, nd) - mst) / mst)
                    self._loo[name] = {
                        "errors": [round(e, 6) for e in errs],
                        "median_abs": float(statistics.median(abs(e) for e in errs)),
                        "max_abs": float(max(abs(e) for e in errs)),
                        "rms": float(math.sqrt(sum(e * e for e in errs) / len(errs))),
                        "points": [[n, round(nd, 3), round(mst, 3)] for n, nd, mst in pts],
                    }
        return self._loo

    def _apply(self, fit: _Fit) -> None:
        self.form_, self.alpha_, self.beta_, self.n_params_ = fit.form, float(fit.alpha), float(fit.beta), fit.n_params
        self._c = float(fit.c)
        latency = float(fit.latency)
        self.gamma_, self.delta_ = (latency, 0.0) if FORMS[fit.form].latency_param == "gamma" else (0.0, latency)

    def _set(self, alpha: float, beta: float, gamma: float, n_params: int) -> None:
        """Set the paper's parameters directly (a model stored without measurements)."""
        self._apply(_Fit(PAPER, float(alpha), float(beta), float(gamma), n_params))

    # -- prediction ------------------------------------------------------------------------------------
    def predict(self, n: int | float, nd_max_ms: float) -> float:
        """Predicted MST (records/s) of n replicas whose ND_max is `nd_max_ms`; 0 if not fitted or n < 1."""
        if self.alpha_ is None or n < 1:
            return 0.0
        latency = self.delta_ if FORMS[self.form_].latency_param == "delta" else self.gamma_
        return FORMS[self.form_].mst(self.alpha_, self.beta_, latency, n, nd_max_ms)

    def mst(self, n: int | float, nd_max_ms: float) -> float:
        """The same as `predict`: the MST the chosen form gives n replicas at ND_max."""
        return self.predict(n, nd_max_ms)

    # -- serialisation ---------------------------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters (scikit-learn convention)."""
        return {"identify_tol_ms": self.identify_tol_ms, "max_measurements": self.max_measurements,
                "form": self.form, "latency": self.latency}

    def fitted_params(self) -> dict[str, Any]:
        """The chosen form and its fitted values (what a report or a scenario's ground truth needs)."""
        return {"form": self.form_, "alpha": self.alpha_, "beta": self.beta_, "gamma": self.gamma_,
                "delta": self.delta_, "n_params": self.n_params_}

    def to_dict(self) -> dict[str, Any]:
        """Everything needed to resume: hyper-parameters, measurements, the fitted values, the form chosen and
        why, and each form's leave-one-out error (`loo`, empty below 3 configurations)."""
        return {
            "params": self.get_params(),
            **self.fitted_params(),
            "form_reason": self.form_reason_,
            "loo": self.loo_errors(),
            "measurements": [m.to_dict() for m in self.measurements_],
        }

    def loo_rms(self) -> dict[str, float]:
        """Each form's root-mean-square leave-one-out error, computed only where `auto` computes it anyway (the
        requested form is `auto` and the data could tell the forms apart); else empty."""
        if not self.chosen_by_loo_:
            return {}
        return {f: round(v["rms"], 6) for f, v in self.loo_errors().items()}

    def frozen(self) -> PerformanceModel:
        """A copy with the fitted values only (no measurements): predicts as this model does now."""
        return PerformanceModel.from_dict({"params": self.get_params(), **self.fitted_params()})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerformanceModel:
        """Rebuild a model written by `to_dict` (refits from the measurements when there are any)."""
        model = cls(**data.get("params", {}))
        ms = [Measurement(int(m["n"]), float(m["nd_max_ms"]), float(m["mst"])) for m in data.get("measurements", [])]
        if ms:
            model.fit(ms)
        elif data.get("alpha") is not None:
            form = check_form(str(data.get("form") or PAPER), allow_auto=False)
            alpha = float(data["alpha"])
            latency = float(data.get("delta" if FORMS[form].latency_param == "delta" else "gamma") or 0.0)
            c = latency * alpha if FORMS[form].latency_param == "delta" else latency
            model._apply(_Fit(form, alpha, float(data.get("beta", 1.0)), c, int(data.get("n_params", 3))))
            model.form_reason_ = "stored values"
        return model

    def __repr__(self) -> str:
        if self.alpha_ is None:
            return "PerformanceModel(unfitted)"
        latency = (f"delta={self.delta_:.4g}" if FORMS[self.form_].latency_param == "delta"
                   else f"gamma={self.gamma_:.4g}")
        return (f"PerformanceModel({self.form_}: alpha={self.alpha_:.4g}, beta={self.beta_:.4g}, {latency}, "
                f"points={len(self.measurements_)})")


def _group(ms: Sequence[Measurement]) -> list[tuple[int, float, float]]:
    """Average repeated measurements of the same configuration (n, ND_max rounded to 0.1 ms)."""
    groups: dict[tuple[int, float], list[Measurement]] = {}
    for m in ms:
        groups.setdefault((m.n, round(m.nd_max_ms, 1)), []).append(m)
    return [
        (n, sum(m.nd_max_ms for m in g) / len(g), sum(m.mst for m in g) / len(g)) for (n, _), g in groups.items()
    ]


def _fit_form(form: str, pts: Sequence[tuple[int, float, float]], identify_tol_ms: float,
              start: tuple[float, float, float] | None) -> _Fit:
    """One form on averaged points, with as many parameters as they identify (the richest that they do)."""
    n = np.array([p[0] for p in pts], dtype=float)
    nd = np.array([p[1] for p in pts], dtype=float)
    mst = np.array([p[2] for p in pts], dtype=float)
    nd_varies = float(nd.max() - nd.min()) > identify_tol_ms
    n_varies = len(set(n.tolist())) > 1
    f = FORMS[form]
    if len(pts) >= 3 and n_varies:
        alpha, beta, c = _fit_nonlinear(f, n, nd, mst, with_c=nd_varies, start=start)
        return _Fit(form, alpha, beta, c, 3 if nd_varies else 2)
    if len(pts) >= 2 and nd_varies:
        fit_linear = _fit_linear_harmonic if f.harmonic else _fit_linear_alpha_c
        alpha, c = fit_linear(n, f.basis(n, nd, n), mst)
        return _Fit(form, alpha, 1.0, c, 2)  # 2 even when c fell back to 0 (the warm start of the next fit)
    return _Fit(form, float(np.sum(mst * n) / np.sum(n * n)), 1.0, 0.0, 1)  # least squares of mst = alpha n


def _fit_linear_alpha_c(n: np.ndarray, h: np.ndarray, mst: np.ndarray) -> tuple[float, float]:
    """alpha, c of mst = alpha n - c h (beta = 1) by least squares; c < 0 keeps the one-parameter model."""
    a = np.column_stack([n, -h])
    (alpha, c), *_ = np.linalg.lstsq(a, mst, rcond=None)
    if c < 0 or alpha <= 0:  # the data says latency does not hurt: keep the one-parameter model
        return float(np.sum(mst * n) / np.sum(n * n)), 0.0
    return float(alpha), float(c)


def _fit_linear_harmonic(n: np.ndarray, h: np.ndarray, mst: np.ndarray) -> tuple[float, float]:
    """alpha, c of 1/mst = 1/(alpha n) + HARMONIC_UNIT c h (beta = 1): linear in 1/alpha and c, by least squares
    on the times per record; a negative c or alpha keeps the one-parameter model."""
    a = np.column_stack([1.0 / n, HARMONIC_UNIT * h])
    (inv_alpha, c), *_ = np.linalg.lstsq(a, 1.0 / mst, rcond=None)
    if c < 0 or inv_alpha <= 0:
        return float(np.sum(mst * n) / np.sum(n * n)), 0.0
    return float(1.0 / inv_alpha), float(c)


def _fit_nonlinear(f: ModelForm, n: np.ndarray, nd: np.ndarray, mst: np.ndarray, with_c: bool,
                   start: tuple[float, float, float] | None = None) -> tuple[float, float, float]:
    """alpha, beta, c by bounded least squares on relative residuals (c fixed to 0 if unidentifiable).

    `start` warm-starts the solver from the previous fit (the analytic Jacobian keeps each refit cheap).
    """
    from scipy.optimize import least_squares  # here: the options table imports this module's form names

    scale = np.maximum(mst, 1e-9)
    log_n = np.log(n)
    k = 3 if with_c else 2

    def residuals(x: np.ndarray) -> np.ndarray:
        g = x[2] if with_c else 0.0
        pow_n = n ** x[1]
        if f.harmonic:
            capacity = x[0] * pow_n
            return (capacity / (1.0 + HARMONIC_UNIT * g * f.basis(n, nd, pow_n) * capacity) - mst) / scale
        return (x[0] * pow_n - g * f.basis(n, nd, pow_n) - mst) / scale

    def jacobian(x: np.ndarray) -> np.ndarray:
        pow_n = n ** x[1]
        if f.harmonic:  # m = P / D with P = alpha n^beta, D = 1 + u c h P: dm/dP = 1 / D^2, dm/dc = -u h P^2 / D^2
            g = x[2] if with_c else 0.0
            capacity = x[0] * pow_n
            uh = HARMONIC_UNIT * f.basis(n, nd, pow_n)
            d2 = (1.0 + uh * g * capacity) ** 2
            cols = [pow_n / d2 / scale, capacity * log_n / d2 / scale]
            if with_c:
                cols.append(-uh * capacity**2 / d2 / scale)
            return np.column_stack(cols)
        d_beta = x[0] * pow_n * log_n
        if with_c and f.basis_grows_with_beta:
            d_beta = d_beta - x[2] * f.basis(n, nd, pow_n) * log_n  # h = n^beta ND_max
        cols = [pow_n / scale, d_beta / scale]
        if with_c:
            cols.append(-f.basis(n, nd, pow_n) / scale)
        return np.column_stack(cols)

    lo = [1e-9, BETA_BOUNDS[0], 0.0][:k]
    hi = [math.inf, BETA_BOUNDS[1], math.inf][:k]
    x0 = np.array([float(np.max(mst / n)), 1.0, 0.0][:k])
    if start is not None and start[0] > 0:
        x0 = np.clip(np.array(start[:k], dtype=float), np.array(lo) + 1e-12, np.array(hi))
        x0[1] = min(x0[1], BETA_BOUNDS[1] - 1e-9)
    res = least_squares(residuals, x0, jac=jacobian, bounds=(lo, hi), xtol=1e-12, ftol=1e-12)
    return float(res.x[0]), float(res.x[1]), float(res.x[2]) if with_c else 0.0
