"""Which node to add or remove: latency-aware (Gesscale) or uniformly random (latency-unaware baselines).

Nodes form a complete weighted graph (networkx), weight = RTT in ms; ND_max(S) is the largest RTT among the
nodes of S (docs/controller.md, Placement).

- Scale-up adds the free node v minimising ND_max(S ∪ {v}); ties go to the smallest sum of RTTs to S, then
  the name. From an empty set, the first node is the one with the smallest sum of RTTs to all others.
- Scale-down removes the node with the greatest latency to the others (largest max RTT to S, then largest
  sum, then name), which lowers ND_max the most.
- Random variants draw uniformly with the caller's seeded `random.Random`.
Nodes that are down or cordoned (not in `candidates`) are never chosen. Pure functions, no I/O.

What the functions reason on (`graph`): a networkx graph (small maps: `LatencyMap.placement_graph`), or any
object with `names`, `index` and `row(i)` giving the RTTs (ms) from node i to every node — a large
`LatencyMap`, read by rows (`RowPlacement`). The row path keeps, for the set being grown, the max and the sum of
RTTs from every node to the set, updated with one row per added node, and adds in the same order as the graph
path, so ties break identically (tests/test_placement_numpy.py checks it on random maps with tied RTTs).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import networkx as nx
import numpy as np

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


def nd_max(graph: Any, nodes: Iterable[str]) -> float:
    """Largest RTT among the given nodes (0 for fewer than two), from the graph's edge weights (or the map's)."""
    if not isinstance(graph, nx.Graph):
        return float(graph.nd_max(nodes))
    return largest_rtt(nodes, lambda a, b: _w(graph, a, b))


def choose_node_to_add(graph: Any, current: Sequence[str], candidates: Iterable[str]) -> str | None:
    """The free candidate that keeps ND_max of the grown set smallest (None when no candidate is free)."""
    if not isinstance(graph, nx.Graph):
        added = RowPlacement(graph, current, candidates).grow(1)
        return added[0] if added else None
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


def choose_node_to_remove(graph: Any, current: Sequence[str]) -> str | None:
    """The replica node with the greatest latency to the others (None when there is none)."""
    if not isinstance(graph, nx.Graph):
        removed = shrink_rows(graph, current, 1)
        return removed[0] if removed else None
    cur = list(current)
    if not cur:
        return None
    if len(cur) == 1:
        return cur[0]

    def key(v: str) -> tuple[float, float, str]:
        rtts = [_w(graph, v, u) for u in cur if u != v]
        return (max(rtts), sum(rtts), v)

    return max(cur, key=key)


def better_move(graph: Any, current: Sequence[str], candidates: Iterable[str],
                threshold_ms: float) -> tuple[str, str, float, float] | None:
    """The one-replica move that lowers ND_max of `current` the most: (node to add, node to remove, ND_max
    before, ND_max after), or None when none lowers it by more than `threshold_ms` (or no candidate is free).

    Each replica is tried as the one to remove, worst first (`choose_node_to_remove`'s order: the greatest
    latency to the others); the node added is the one `choose_node_to_add` picks for the rest, so a move lands
    where a scale-up of the rest would. The smallest ND_max after wins; among equals, the worst node goes.
    """
    cur = list(current)
    if len(cur) < 2:
        return None  # ND_max of one node is 0: nothing to gain
    pool = [c for c in candidates if c not in cur]
    if not pool:
        return None
    before = nd_max(graph, cur)

    def badness(v: str) -> tuple[float, float, str]:  # choose_node_to_remove's key: max RTT, sum, name
        rtts = [graph_rtt(graph, v, u) for u in cur if u != v]
        return (max(rtts), sum(rtts), v)

    order = sorted(cur, key=badness, reverse=True)
    best: tuple[str, str, float, float] | None = None
    for remove in order:
        rest = [n for n in cur if n != remove]
        add = choose_node_to_add(graph, rest, pool)
        if add is None:
            continue
        after = nd_max(graph, [*rest, add])
        if best is None or after < best[3]:
            best = (add, remove, before, after)
    return best if best is not None and before - best[3] > threshold_ms else None


def graph_rtt(graph: Any, a: str, b: str) -> float:
    """The RTT between two nodes on either kind of placement graph (networkx or a map read by rows)."""
    if isinstance(graph, nx.Graph):
        return _w(graph, a, b)
    return float(graph.rtt(a, b))


def grow(graph: Any, current: Sequence[str], candidates: Iterable[str], k: int) -> list[str]:
    """Add k nodes one by one with `choose_node_to_add`; returns the nodes added (fewer if none are free)."""
    if not isinstance(graph, nx.Graph):
        return RowPlacement(graph, current, candidates).grow(k)
    cur, added = list(current), []
    pool = list(candidates)
    for _ in range(k):
        v = choose_node_to_add(graph, cur, pool)
        if v is None:
            break
        cur.append(v)
        added.append(v)
    return added


def starting_nodes(graph: Any, candidates: Iterable[str], first: str, n: int) -> tuple[str, ...]:
    """The `n` nodes a live run starts on: `first` (the node whose executor ran the warm-up) and the nodes nearest
    to it, added one at a time as a scale-up adds them (`grow`), whatever the policy, so that every policy starts
    from the same placement."""
    return (first, *grow(graph, [first], candidates, n - 1)) if n > 1 else (first,)


def shrink(graph: Any, current: Sequence[str], k: int) -> list[str]:
    """Remove k nodes one by one with `choose_node_to_remove`; returns the nodes removed."""
    if not isinstance(graph, nx.Graph):
        return shrink_rows(graph, current, k)
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


def best_nd_max_by_size(graph: Any, candidates: Iterable[str], n_max: int) -> list[float]:
    """ND_max of the greedy latency-aware set of each size 0..n_max (what `grow` reaches from empty).

    The oracle and the demand metric use it as "the best placement" for n replicas.
    """
    nodes = grow(graph, [], list(candidates), n_max)
    return prefix_nd_max(graph, nodes)


def prefix_nd_max(graph: Any, nodes: Sequence[str]) -> list[float]:
    """ND_max of every prefix nodes[:k], k = 0..len(nodes): one block of RTTs, a running maximum."""
    k = len(nodes)
    if k < 2:
        return [0.0] * (k + 1)
    if isinstance(graph, nx.Graph):
        sub = np.array([[_w(graph, a, b) for b in nodes] for a in nodes])
    else:
        sub = graph.block(nodes)
    # ND_max(nodes[:m]) = max over pairs inside the prefix: the max of row m-1's first m-1 entries, accumulated
    newest = np.array([0.0] + [float(sub[m, :m].max()) for m in range(1, k)])
    return [0.0, *(float(x) for x in np.maximum.accumulate(newest))]


def capacity_nd_max(graph: Any, current: Sequence[str], candidates: Iterable[str], n_min: int,
                    n_max: int) -> dict[int, float]:
    """ND_max of `capacity_sets` for every size it reaches, from two orderings whose prefixes are those sets."""
    cur = list(current)
    out: dict[int, float] = {}
    if n_max > len(cur) or not cur:
        grown = cur + grow(graph, cur, candidates, max(0, n_max - len(cur)))
        nds = prefix_nd_max(graph, grown)
        for m in range(len(cur), len(grown) + 1):
            out[m] = nds[m]
    if cur and n_min < len(cur):
        removed = shrink(graph, cur, len(cur) - max(n_min, 0))
        order = [c for c in cur if c not in set(removed)] + removed[::-1]
        nds = prefix_nd_max(graph, order)
        for m in range(len(cur) - len(removed), len(cur) + 1):
            out[m] = nds[m]
    elif cur:
        out[len(cur)] = nd_max(graph, cur)
    return {m: v for m, v in out.items() if n_min <= m <= n_max}


class RowPlacement:
    """Greedy latency-aware growth on a map's rows (numpy): the graph path's rule, ties and order, per row.

    For every node it keeps the largest RTT to the set (`mx`) and the sum of its RTTs to the set (`sm`), summed in
    the order the set was built, as the graph path sums them; adding a node costs one row.
    """

    def __init__(self, rows: Any, current: Sequence[str], candidates: Iterable[str]) -> None:
        self.rows = rows
        self.names: list[str] = rows.names
        index = rows.index
        n = len(self.names)
        self.cur = list(current)
        for c in self.cur:
            if c not in index:
                raise UserError(f"no latency known between {c} and the other nodes")
        self.free = _candidate_mask(rows, candidates)
        self.mx = np.zeros(n)
        self.sm = np.zeros(n)
        self.base = 0.0
        members = [index[c] for c in self.cur]
        if members:
            sub = rows.block(self.cur) if len(members) > 1 else np.zeros((1, 1))
            self.base = float(sub.max())
            for i in members:
                r = rows.row(i)
                np.maximum(self.mx, r, out=self.mx)
                self.sm += r
            self.free[members] = False

    def grow(self, k: int) -> list[str]:
        """Add up to k nodes; returns them in order."""
        added: list[str] = []
        for _ in range(k):
            v = self._next()
            if v is None:
                break
            added.append(self.names[v])
            self._add(v)
        return added

    def _next(self) -> int | None:
        free = np.flatnonzero(self.free)
        if len(free) == 0:
            return None
        if not self.cur:
            sums = column_sums(self.rows)[free]
            tied = free[sums == sums.min()]
            return min(tied.tolist(), key=self.names.__getitem__)
        key = np.maximum(self.base, self.mx[free])
        tied = free[key == key.min()]
        if len(tied) > 1:
            s = self.sm[tied]
            tied = tied[s == s.min()]
        if len(tied) > 1:
            return min(tied.tolist(), key=self.names.__getitem__)
        return int(tied[0])

    def _add(self, v: int) -> None:
        if self.cur:
            self.base = max(self.base, float(self.mx[v]))
        r = self.rows.row(v)
        np.maximum(self.mx, r, out=self.mx)
        self.sm += r
        self.cur.append(self.names[v])
        self.free[v] = False


def _candidate_mask(rows: Any, candidates: Iterable[str]) -> np.ndarray:
    """A boolean mask over the map's nodes of the candidates (cached for the last candidates tuple seen)."""
    memo = rows.memo() if hasattr(rows, "memo") else {}
    last = memo.get("candidates")
    if last is not None and last[0] is candidates:
        return last[1].copy()
    index = rows.index
    mask = np.zeros(len(rows.names), dtype=bool)
    for c in candidates:
        i = index.get(c)
        if i is not None:
            mask[i] = True
    if isinstance(candidates, tuple):
        memo["candidates"] = (candidates, mask.copy())
    return mask


def column_sums(rows: Any) -> np.ndarray:
    """For every node, the sum of its RTTs to all nodes, added in map order as the graph path adds them.

    Computed once per map (it reads every row: the first node of a placement from nothing).
    """
    memo = rows.memo() if hasattr(rows, "memo") else {}
    cached = memo.get("column_sums")
    if cached is None:
        n = len(rows.names)
        cached = np.zeros(n)
        for u in range(n):
            cached += rows.row(u)
        memo["column_sums"] = cached
    return cached


def shrink_rows(rows: Any, current: Sequence[str], k: int) -> list[str]:
    """`shrink` on a map's rows: remove k nodes, each the one with the largest max RTT to the others, then the
    largest sum (added in the order of `current`), then the name."""
    cur = list(current)
    if not cur or k <= 0:
        return []
    sub = rows.block(cur)  # sub[a, b] = RTT between cur[a] and cur[b]
    alive = np.ones(len(cur), dtype=bool)
    removed: list[str] = []
    for _ in range(min(k, len(cur))):
        left = np.flatnonzero(alive)
        if len(left) == 1:
            v = int(left[0])
        else:
            part = sub[np.ix_(left, left)]
            mx = part.max(axis=1)
            sm = np.cumsum(part, axis=1)[:, -1]  # in order, as `sum` adds (the 0 of the node itself changes nothing)
            best = np.flatnonzero(mx == mx.max())
            if len(best) > 1:
                best = best[sm[best] == sm[best].max()]
            v = int(left[max(best.tolist(), key=lambda b: cur[int(left[b])])]) if len(best) > 1 else int(left[best[0]])
        alive[v] = False
        removed.append(cur[v])
    return removed
