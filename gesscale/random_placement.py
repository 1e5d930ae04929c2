"""What a latency-unaware choice of nodes would have given: seeded random placements and their median ND_max.

A latency-unaware policy (`mdl-nlunaware`, `thr-nlunaware`) grows its placement one uniformly drawn node at a
time, so its placement of n nodes is a uniformly drawn set of n among the available nodes. The median ND_max over
many such draws is the figure a latency-aware choice is compared with (the demo's report), and the placement at
that median is the one `benchmarks/bench_placement.py` measures as "the median random placement". Pure, seeded.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

from gesscale.latency_map import LatencyMap

DRAWS = 1000


def random_placements(names: Sequence[str], n: int, seed: int = 1, draws: int = DRAWS) -> list[tuple[str, ...]]:
    """`draws` placements of n distinct nodes drawn uniformly from `names` (each in the order of `names`)."""
    if not 1 <= n <= len(names):
        raise ValueError(f"cannot place {n} replicas on {len(names)} nodes")
    rng = random.Random(seed)
    order = {v: i for i, v in enumerate(names)}
    return [tuple(sorted(rng.sample(list(names), n), key=order.__getitem__)) for _ in range(draws)]


def median_random_nd_max(lmap: LatencyMap, names: Sequence[str], n: int, seed: int = 1,
                         draws: int = DRAWS) -> float:
    """The median ND_max (ms) of seeded random placements of n nodes among `names`."""
    return float(statistics.median(lmap.nd_max(p) for p in random_placements(names, n, seed, draws)))


def median_random_placement(lmap: LatencyMap, names: Sequence[str], n: int, seed: int = 1,
                            draws: int = DRAWS) -> tuple[str, ...]:
    """A drawn placement at the lower median of ND_max (the first drawn one with that ND_max)."""
    drawn = random_placements(names, n, seed, draws)
    ranked = sorted(range(len(drawn)), key=lambda i: (lmap.nd_max(drawn[i]), i))
    return drawn[ranked[(len(ranked) - 1) // 2]]
