"""Latency-aware and random placement on a hand-made map (docs/controller.md, Placement)."""

from __future__ import annotations

import random

from gesscale import placement
from gesscale.latency_map import latency_map_from_dict

# a, b, c close together; d mid; e far from everyone.
MAP = latency_map_from_dict({
    "nodes": ["a", "b", "c", "d", "e"],
    "rtt_ms": {
        "a": {"b": 5, "c": 8, "d": 40, "e": 200},
        "b": {"c": 6, "d": 30, "e": 190},
        "c": {"d": 35, "e": 180},
        "d": {"e": 150},
    },
})
G = MAP.graph()


def test_nd_max_is_largest_pairwise_rtt() -> None:
    assert placement.nd_max(G, ["a", "b", "d"]) == 40
    assert placement.nd_max(G, ["a"]) == 0


def test_scale_up_adds_the_min_nd_max_node() -> None:
    assert placement.choose_node_to_add(G, ["a", "b"], ["c", "d", "e"]) == "c"   # ND_max 8 < 40 < 200
    assert placement.choose_node_to_add(G, ["a", "b", "c"], ["d", "e"]) == "d"


def test_scale_up_tie_breaks_on_sum_of_rtts() -> None:
    # Current {a, e}: ND_max is 200 whatever is added among b, c, d; sums to {a, e}: b 195, c 188, d 190.
    assert placement.choose_node_to_add(G, ["a", "e"], ["b", "c", "d"]) == "c"


def test_cordoned_or_down_nodes_are_never_chosen() -> None:
    assert placement.choose_node_to_add(G, ["a", "b"], ["d", "e"]) == "d"
    assert placement.choose_node_to_add(G, ["a", "b"], []) is None


def test_scale_down_removes_greatest_latency_node() -> None:
    assert placement.choose_node_to_remove(G, ["a", "b", "c", "e"]) == "e"
    assert placement.shrink(G, ["a", "b", "c", "d", "e"], 2) == ["e", "d"]


def test_first_node_has_smallest_total_rtt() -> None:
    # sums: a 253, b 231, c 229, d 255, e 720
    assert placement.grow(G, [], MAP.names, 1) == ["c"]


def test_random_placement_is_seeded_and_respects_candidates() -> None:
    a = placement.grow_random(["a"], ["b", "c", "d"], 2, random.Random(3))
    b = placement.grow_random(["a"], ["b", "c", "d"], 2, random.Random(3))
    assert a == b and set(a) <= {"b", "c", "d"} and len(a) == 2
