"""Seeded random placements and their median ND_max (the demo report's latency-unaware comparison)."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest

from gesscale.latency_map import load_latency_map
from gesscale.random_placement import median_random_nd_max, median_random_placement, random_placements

MAPS = Path(__file__).resolve().parents[1] / "inventory" / "latency"


def test_draws_are_seeded_distinct_nodes_in_map_order() -> None:
    names = ["a", "b", "c", "d", "e"]
    drawn = random_placements(names, 3, seed=7, draws=200)
    assert drawn == random_placements(names, 3, seed=7, draws=200)
    assert drawn != random_placements(names, 3, seed=8, draws=200)
    assert all(len(set(p)) == 3 and list(p) == sorted(p) for p in drawn)
    assert len(set(drawn)) == 10  # every one of the C(5, 3) sets comes up in 200 draws
    with pytest.raises(ValueError):
        random_placements(names, 6)


@pytest.mark.parametrize("n", [2, 3])
def test_median_matches_the_exact_median_over_all_placements_on_the_demo_map(n: int) -> None:
    lmap = load_latency_map(MAPS / "rhine6.yaml")
    exact = statistics.median(lmap.nd_max(c) for c in itertools.combinations(lmap.names, n))
    drawn = median_random_nd_max(lmap, lmap.names, n, seed=1)
    # 1000 draws: within the neighbouring values of the exact distribution
    values = sorted({lmap.nd_max(c) for c in itertools.combinations(lmap.names, n)})
    i = min(range(len(values)), key=lambda k: abs(values[k] - exact))
    assert values[max(0, i - 1)] <= drawn <= values[min(len(values) - 1, i + 1)]
    chosen = median_random_placement(lmap, lmap.names, n, seed=1)
    assert len(chosen) == n and lmap.nd_max(chosen) <= drawn


def test_on_the_demo_map_the_nearest_placement_is_far_below_the_random_median() -> None:
    """The layout's point (docs/testbed.md): a random choice lands on a remote node, the nearest does not."""
    from gesscale import placement

    lmap = load_latency_map(MAPS / "rhine6.yaml")
    for n in (2, 3):
        near = placement.grow(lmap.graph(), [], lmap.names, n)
        assert lmap.nd_max(near) < 2.0 < 30.0 < median_random_nd_max(lmap, lmap.names, n)
