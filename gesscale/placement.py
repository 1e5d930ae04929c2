"""Which node to add or remove: latency-aware (Gesscale) or uniformly random (latency-unaware baselines).

Nodes form a complete weighted graph (networkx), weight = RTT in ms; ND_max(S) is the largest RTT among the
nodes of S (docs/controller.md, Placement).

- Scale-up adds the free node v minimising ND_max(S ∪ {v}); ties go to the smallest sum of RTTs to S, then
  the name. From an empty set, the first node is the one with the smallest sum of RTTs to all others.
- Scale-down removes the node with the greatest latency to the others (largest max RTT to S, then largest
  sum, then name), which lowers ND_max the most.
- Random variants draw uniformly with the caller's seeded `random.Random`.
Nodes that are down or cordoned (not in `candidates`) are never chosen. Pure functions, no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

import networkx as nx

from gesscale.errors import UserError


def _w(graph: nx.Graph, a: str, b: str) -> float:
    if a == b:
        return 0.0
    try:
        return float(graph[a][b]["weight"])
    except KeyError:
        raise UserError(f"no latency known between {a} and {b}") from None


def largest_rtt(nodes: Iterable[str], rtt: Callable[[str, str], float]) -> float:
    """ND_max, defined once: the largest `rtt(a, b)` among the pairs of `nodes` (0 for fewer than two).

    `nd_max` applies it to a graph's edge weights, `LatencyMap.nd_max` to a map's RTTs in force.
    """
    chosen = list(nodes)
    worst = 0.0
    for i, a in enumerate(chosen):
        for b in chosen[i + 1 :]:
            worst = max(worst, rtt(a, b))
    return worst


def nd_max(graph: nx.Graph, nodes: Iterable[str]) -> float:
    """Largest RTT among the given nodes (0 for fewer than two), from the graph's edge weights."""
    return largest_rtt(nodes, lambda a, b: _w(graph, a, b))


def choose_node_to_add(graph: nx.Graph, current: Sequence[str], candidates: Iterable[str]) -> str | None:
    """The free candidate that keeps ND_max of the grown set smallest (None when no candidate is free)."""
    cur = list(current)
    base = nd_max(graph, cur)
    pool = [c for c in candidates if c not in cur]
    if not pool:
        return None
    if not cur:
        everyone = list(graph.nodes)
        return min(pool, key=lambda v: (sum(_w(graph, v, u) for u in everyone), v))

    def key(v: str) -> tuple[float, float, str]:
        rtts = [_w(graph, v, u) for u in cur]
        return (max(base, max(rtts)), sum(rtts), v)

    return min(pool, key=key)


def choose_node_to_remove(graph: nx.Graph, current: Sequence[str]) -> str | None:
    """The replica node with the greatest latency to the others (None when there is none)."""
    cur = list(current)
    if not cur:
        return None
    if len(cur) == 1:
        return cur[0]

    def key(v: str) -> tuple[float, float, str]:
        rtts = [_w(graph, v, u) for u in cur if u != v]
        return (max(rtts), sum(rtts), v)

    return max(cur, key=key)


def grow(graph: nx.Graph, current: Sequence[str], candidates: Iterable[str], k: int) -> list[str]:
    """Add k nodes one by one with `choose_node_to_add`; returns the nodes added (fewer if none are free)."""
    cur, added = list(current), []
    pool = list(candidates)
    for _ in range(k):
        v = choose_node_to_add(graph, cur, pool)
        if v is None:
            break
        cur.append(v)
        added.append(v)
    return added


def shrink(graph: nx.Graph, current: Sequence[str], k: int) -> list[str]:
    """Remove k nodes one by one with `choose_node_to_remove`; returns the nodes removed."""
    cur, removed = list(current), []
    for _ in range(min(k, len(cur))):
        v = choose_node_to_remove(graph, cur)
        if v is None:
            break
        cur.remove(v)
        removed.append(v)
    return removed


def grow_random(current: Sequence[str], candidates: Iterable[str], k: int, rng: random.Random) -> list[str]:
    """Add k free candidates drawn uniformly at random."""
    pool = sorted(c for c in candidates if c not in set(current))
    return rng.sample(pool, min(k, len(pool)))


def shrink_random(current: Sequence[str], k: int, rng: random.Random) -> list[str]:
    """Remove k replica nodes drawn uniformly at random."""
    cur = sorted(current)
    return rng.sample(cur, min(k, len(cur)))


def best_nd_max_by_size(graph: nx.Graph, candidates: Iterable[str], n_max: int) -> list[float]:
    """ND_max of the greedy latency-aware set of each size 0..n_max (what `grow` reaches from empty).

    The oracle and the demand metric use it as "the best placement" for n replicas.
    """
    nodes = grow(graph, [], list(candidates), n_max)
    return [nd_max(graph, nodes[:k]) for k in range(len(nodes) + 1)]
