"""The placement on a map's numpy rows chooses exactly what the placement on the networkx graph chooses.

Large maps are placed on rows (`placement.RowPlacement`, `shrink_rows`), small ones on the graph; both must give
the same nodes, ties included. Random small maps whose RTTs come from a handful of values (so ties on ND_max and on
the sum are common) and sums of non-integral values (so the order of addition matters) check it.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from gesscale import placement
from gesscale.latency_map import latency_map_from_dict
from gesscale.model import Measurement, PerformanceModel
from gesscale.policies.gesscale_plus import capacities, capacity_with

VALUES = (0.1, 0.2, 0.3, 1.0, 2.5, 7.7, 10.0)  # 0.1 + 0.2 != 0.3 in floating point: sums must be added in order


@st.composite
def maps(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(3, 9))
    names = draw(st.permutations([f"n{i}" for i in range(n)]))  # map order is not name order
    pairs = list(itertools.combinations(range(n), 2))
    rtts = draw(st.lists(st.sampled_from(VALUES), min_size=len(pairs), max_size=len(pairs)))
    doc = {"nodes": list(names), "rtt_ms": {}}
    for (i, j), v in zip(pairs, rtts, strict=True):
        doc["rtt_ms"].setdefault(names[i], {})[names[j]] = v
    lmap = latency_map_from_dict(doc, "random")
    current = draw(st.lists(st.sampled_from(names), unique=True, max_size=n - 1))
    candidates = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
    return lmap, current, candidates


@settings(max_examples=300, deadline=None)
@given(maps(), st.integers(1, 9))
def test_rows_and_graph_grow_and_shrink_the_same_nodes(case: tuple, k: int) -> None:
    lmap, current, candidates = case
    g = lmap.graph()
    assert placement.grow(lmap, current, candidates, k) == placement.grow(g, current, candidates, k)
    assert placement.shrink(lmap, current, k) == placement.shrink(g, current, k)
    assert placement.choose_node_to_add(lmap, current, candidates) == placement.choose_node_to_add(
        g, current, candidates)
    assert placement.choose_node_to_remove(lmap, current) == placement.choose_node_to_remove(g, current)
    assert placement.best_nd_max_by_size(lmap, candidates, k) == placement.best_nd_max_by_size(g, candidates, k)


@settings(max_examples=200, deadline=None)
@given(maps(), st.integers(0, 3), st.integers(1, 9))
def test_capacities_from_prefixes_equal_one_placement_per_size(case: tuple, n_min: int, n_max: int) -> None:
    lmap, current, candidates = case
    model = PerformanceModel()
    for n, nd, mst in ((1, 0.0, 50.0), (2, 1.0, 90.0), (4, 5.0, 160.0)):
        model.add(Measurement(n, nd, mst))
    pool = tuple(candidates)
    for graph in (lmap.graph(), lmap):
        expected = {m: capacity_with(model, graph, tuple(current), pool, m) for m in range(n_min, n_max + 1)}
        assert capacities(model, graph, tuple(current), pool, n_min, n_max) == expected


def test_a_tie_on_nd_max_and_sum_goes_to_the_name_on_both_paths() -> None:
    lmap = latency_map_from_dict({"nodes": ["z", "b", "a"], "rtt_ms": {"z": {"b": 5, "a": 5}, "b": {"a": 5}}})
    assert placement.grow(lmap, ["z"], ["b", "a"], 1) == ["a"] == placement.grow(lmap.graph(), ["z"], ["b", "a"], 1)
