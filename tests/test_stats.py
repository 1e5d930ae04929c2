"""The statistics of repeated runs (gesscale/stats.py), against cases worked out by hand."""

from __future__ import annotations

import pytest

from gesscale.stats import bootstrap_interval, paired_comparison, sign_flip_p


@pytest.mark.parametrize(("diffs", "p"), [
    ([1.0, 2.0, 3.0], 2 / 8),  # all positive, k = 3: only all-plus and all-minus are as extreme -> 0.25
    ([0.5, 1.0, 2.0, 4.0, 8.0, 16.0], 2 / 64),  # six blocks all positive -> 2/64
    ([-5.0, -1.0, -2.0, -3.0, -4.0, -6.0], 2 / 64),  # two-sided: all negative is as extreme
    ([3.0, -1.0, 2.0], 4 / 8),  # sum 4; of ±3±1±2 = 6,4,2,0,0,-2,-4,-6 four reach |4|
    ([1.0, -1.0], 1.0),  # sum 0: every assignment is at least as extreme
    ([2.0, 2.0, 2.0, -2.0], 10 / 16),  # |sum| 4 or more: all four alike (2) or three alike (8) -> 10/16
])
def test_exact_sign_flip_p_values(diffs: list[float], p: float) -> None:
    assert sign_flip_p(diffs) == pytest.approx(p, abs=1e-12)


def test_sign_flip_refuses_more_blocks_than_it_enumerates() -> None:
    with pytest.raises(ValueError, match="at most 20 blocks"):
        sign_flip_p([1.0] * 21)


def test_bootstrap_of_the_median_of_two_values() -> None:
    # resampling {1, 2} twice: medians 1 (1/4), 1.5 (1/2), 2 (1/4); the 2.5 % and 97.5 % quantiles are 1 and 2
    ci = bootstrap_interval([1.0, 2.0], "median", resamples=20_000, seed=3)
    assert (ci.value, ci.lo, ci.hi, ci.n) == (1.5, 1.0, 2.0, 2)


def test_bootstrap_is_seeded_and_a_single_value_has_no_width() -> None:
    values = [3.0, 9.0, 4.0, 7.0, 5.0, 12.0, 6.0]
    a, b = bootstrap_interval(values, seed=5), bootstrap_interval(values, seed=5)
    assert a == b and a.value == 6.0 and 3.0 <= a.lo <= a.value <= a.hi <= 12.0
    one = bootstrap_interval([42.0])
    assert (one.value, one.lo, one.hi) == (42.0, 42.0, 42.0)
    with pytest.raises(ValueError):
        bootstrap_interval([1.0, float("nan")])


def test_paired_comparison_by_block() -> None:
    c = paired_comparison("a", "b", [10.0, 12.0, 11.0], [8.0, 9.0, 10.0])
    assert c.differences == (2.0, 3.0, 1.0) and c.mean.value == 2.0 and c.p_value == 0.25
    assert 1.0 <= c.mean.lo <= 2.0 <= c.mean.hi <= 3.0
    with pytest.raises(ValueError, match="one value of each per block"):
        paired_comparison("a", "b", [1.0], [1.0, 2.0])
