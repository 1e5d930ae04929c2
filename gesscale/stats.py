"""Statistics of repeated runs: a median with its bootstrap interval, and block-paired comparisons (pure, no I/O).

Methods (stated in docs/experiments.md, and in every bundle that uses them):
- per policy and metric: the median of the runs, with a 95 % **percentile bootstrap** interval of the median
  (B resamples of the runs with replacement, seeded);
- per named pair (a, b), over the blocks in which both ran: the per-block differences d_i = a_i - b_i; the
  estimate is their **mean**, its interval the percentile bootstrap of that mean (blocks resampled), and the
  p-value the **exact sign-flip (permutation) test** on the mean, two-sided: the share of the 2^k assignments of
  signs to the |d_i| whose mean is at least as far from 0 as the observed one. Under the null hypothesis that a
  and b do not differ, each block's difference is as likely to be negative as positive. With k blocks the
  smallest possible p-value is 2 / 2^k (k = 3: 0.25; k = 6: 0.031).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 10_000
MAX_EXACT_BLOCKS = 20  # 2^20 sign assignments: about 8 MB of sums


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: `value` in [`lo`, `hi`] at `level`, from `n` values."""

    value: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready."""
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n, "level": self.level}


def _values(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("need at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values must be finite")
    return arr


def bootstrap_interval(values: Sequence[float], statistic: str = "median", resamples: int = DEFAULT_RESAMPLES,
                       level: float = 0.95, seed: int = 0) -> Interval:
    """`statistic` ("median" or "mean") of `values` with its percentile bootstrap interval: `resamples` samples of
    the same size drawn with replacement (numpy's default generator, `seed`), the statistic of each, and the
    (1 - level) / 2 and (1 + level) / 2 quantiles of those. One value gives a zero-width interval."""
    arr = _values(values)
    func = {"median": np.median, "mean": np.mean}[statistic]
    rng = np.random.default_rng(seed)
    samples = func(arr[rng.integers(0, arr.size, size=(resamples, arr.size))], axis=1)
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(func(arr)), float(lo), float(hi), int(arr.size), level)


def sign_flip_p(differences: Sequence[float]) -> float:
    """Exact two-sided sign-flip p-value of the mean of `differences`: the share of all 2^k sign assignments
    whose |sum| is at least the observed |sum| (with a relative tolerance for float rounding)."""
    d = _values(differences)
    if d.size > MAX_EXACT_BLOCKS:
        raise ValueError(f"exact sign-flip test: at most {MAX_EXACT_BLOCKS} blocks, got {d.size}")
    sums = np.zeros(1)
    for x in np.abs(d):
        sums = np.concatenate((sums + x, sums - x))
    observed = abs(float(d.sum()))
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    return float(np.count_nonzero(np.abs(sums) >= observed - tol)) / sums.size


@dataclass(frozen=True)
class PairedComparison:
    """a - b over the blocks both ran in: the mean difference with its interval, and the sign-flip p-value."""

    a: str
    b: str
    differences: tuple[float, ...]
    mean: Interval
    p_value: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {"a": self.a, "b": self.b, "differences": list(self.differences), "blocks": len(self.differences),
                "mean_difference": self.mean.to_dict(), "p_value": self.p_value}


def paired_comparison(a: str, b: str, values_a: Sequence[float], values_b: Sequence[float],
                      resamples: int = DEFAULT_RESAMPLES, level: float = 0.95, seed: int = 0) -> PairedComparison:
    """Compare `a` and `b` block by block: `values_a[i]` and `values_b[i]` come from the same block."""
    if len(values_a) != len(values_b):
        raise ValueError("paired values need one value of each per block")
    diffs = _values(values_a) - _values(values_b)
    return PairedComparison(a, b, tuple(float(x) for x in diffs),
                            bootstrap_interval(diffs, "mean", resamples, level, seed), sign_flip_p(diffs))
