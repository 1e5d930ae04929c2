"""Fog events: partitions, flapping links, node crashes, leaves, joins and churn (docs/events.md).

The one schema of what happens to a fog during a run beside the link changes of a latency map. An entry is a
mapping with `t_s` (seconds from the start of a run) and `event:` naming its kind; an entry without `event:` (or
with `event: link`) is a link change of `gesscale.latency_map`. The same entries are a map's `changes:`, an
experiment's `events:` and the file of `--events FILE`::

    - {t_s: 600, event: partition, groups: [[pi01, pi02], [pi03]], duration_s: 300}
    - {t_s: 600, event: partition, pairs: [[pi01, pi03]]}           # no duration_s: never heals
    - {t_s: 900, event: flap, pair: [pi01, pi02], period_s: 60, down_s: 10, duration_s: 600}
    - {t_s: 1200, event: crash, node: pi04, duration_s: 900}        # no duration_s: never comes back
    - {t_s: 1500, event: leave, node: pi05, drain_s: 60}
    - {t_s: 2400, event: join, node: pi06}
    - {t_s: 0, event: churn, rate_per_h: 2, duration_s: 7200, down_s: 600, seed: 7, nodes: [pi07, pi08]}

Pure: parsing, validation (every problem one `UserError` naming the entry and the key) and the schedule's state
at a second (`EventSchedule`). Where the events act (the simulator; the live environments later) is the
caller's business.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gesscale.errors import UserError, brief
from gesscale.schema import check_keys, number

EVENT_KINDS = ("partition", "flap", "crash", "leave", "join", "churn")
# Ranges of every number (a value outside is refused): times and durations up to a year of run; a flap's period
# up to a day; a churn rate up to one crash a second (3600 per hour); a churn expands to at most MAX_CHURN_CRASHES
# crashes (more is a unit mistake, and would make the schedule as long as the run).
MAX_EVENT_S = 366 * 86400.0
MAX_FLAP_PERIOD_S = 86400.0
MAX_CHURN_RATE_PER_H = 3600.0
MAX_CHURN_CRASHES = 10_000
MAX_SEED = 10**9
DEFAULT_DRAIN_S = 60.0
KEYS: dict[str, tuple[str, ...]] = {
    "partition": ("t_s", "event", "pairs", "groups", "duration_s"),
    "flap": ("t_s", "event", "pair", "period_s", "down_s", "duration_s"),
    "crash": ("t_s", "event", "node", "duration_s"),
    "leave": ("t_s", "event", "node", "drain_s"),
    "join": ("t_s", "event", "node"),
    "churn": ("t_s", "event", "rate_per_h", "duration_s", "down_s", "seed", "nodes"),
}
# Node states: up (hosts replicas), leaving (drained: keeps its replicas, takes no new one), down (crashed),
# gone (left, or not joined yet).
UP, LEAVING, DOWN, GONE = "up", "leaving", "down", "gone"


@dataclass(frozen=True)
class FogEvent:
    """One declared event: its kind, when, whom it concerns, and its numbers (None where the kind has none).

    `nodes` is (node,) for crash, leave and join, (a, b) for a flap, the nodes given (or every node of the map)
    for churn. `pairs` is the pairs a partition cuts (a pair list as given, two groups as every pair across).
    `duration_s` None means never: a partition that does not heal, a crash the node never comes back from, a flap
    for the rest of the run.
    """

    t_s: float
    kind: str
    nodes: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    duration_s: float | None = None
    period_s: float | None = None
    down_s: float | None = None
    drain_s: float | None = None
    rate_per_h: float | None = None
    seed: int | None = None
    all_nodes: bool = False  # churn without `nodes:` (every node of the map)

    def to_dict(self) -> dict[str, Any]:
        """The event in its YAML form (a churn keeps its seed, so the record says which crashes it drew)."""
        d: dict[str, Any] = {"t_s": self.t_s, "event": self.kind}
        if self.kind == "partition":
            if self.groups:
                d["groups"] = [list(g) for g in self.groups]
            else:
                d["pairs"] = [list(p) for p in self.pairs]
        elif self.kind == "flap":
            d.update(pair=list(self.nodes), period_s=self.period_s, down_s=self.down_s)
        elif self.kind == "churn":
            d.update(rate_per_h=self.rate_per_h, down_s=self.down_s, seed=self.seed)
            if not self.all_nodes:
                d["nodes"] = list(self.nodes)
        else:
            d["node"] = self.nodes[0]
        if self.kind == "leave":
            d["drain_s"] = self.drain_s
        if self.duration_s is not None:
            d["duration_s"] = self.duration_s
        return d


def _node(value: Any, nodes: Mapping[str, Any], where: str, key: str) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise UserError(f"{where}: '{key}' must be a node name, got {brief(value)}")
    name = str(value)
    if name not in nodes:
        raise UserError(f"{where}: '{key}' names unknown node {name!r}")
    return name


def _pair(value: Any, nodes: Mapping[str, Any], where: str, key: str) -> tuple[str, str]:
    if not isinstance(value, list) or len(value) != 2:
        raise UserError(f"{where}: '{key}' must be a list of two nodes [a, b], got {brief(value)}")
    a, b = _node(value[0], nodes, where, key), _node(value[1], nodes, where, key)
    if a == b:
        raise UserError(f"{where}: '{key}' ({a}, {b}): a node has no link to itself")
    return a, b


def _node_list(value: Any, nodes: Mapping[str, Any], where: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: '{key}' must be a non-empty list of nodes, got {brief(value)}")
    out = tuple(_node(v, nodes, where, key) for v in value)
    if len(set(out)) != len(out):
        raise UserError(f"{where}: '{key}' lists a node twice")
    return out


def _duration(entry: Mapping[str, Any], key: str, where: str, *, required: bool = False,
              hi: float = MAX_EVENT_S) -> float | None:
    """An optional (None or absent: never ends) or required duration in (0, hi] s; `10m` style is taken."""
    if entry.get(key) is None:
        if required:
            raise UserError(f"{where}: missing '{key}' (seconds)")
        return None
    return float(number(entry, key, None, where, lo=0.0, lo_open=True, hi=hi, duration=True))


def parse_event(entry: Mapping[str, Any], nodes: Mapping[str, Any], where: str) -> FogEvent:
    """One entry with `event:` (not `link`), checked against the map's `nodes`; a `UserError` names the key."""
    kind = entry.get("event")
    if kind not in EVENT_KINDS:
        raise UserError(f"{where}: 'event' must be one of link, {', '.join(EVENT_KINDS)}, got {brief(kind)}")
    check_keys(entry, KEYS[kind], where)
    if "t_s" not in entry:
        raise UserError(f"{where}: missing 't_s' (seconds from the start of a run)")
    t = float(number(entry, "t_s", None, where, lo=0.0, hi=MAX_EVENT_S, duration=True))
    where = f"{where} ({kind} at t_s {t:g})"
    if kind == "partition":
        if ("pairs" in entry) == ("groups" in entry):
            raise UserError(f"{where}: give either 'pairs' ([[a, b], ...]) or 'groups' ([[a, ...], [b, ...]])")
        duration = _duration(entry, "duration_s", where)
        if "pairs" in entry:
            raw = entry["pairs"]
            if not isinstance(raw, list) or not raw:
                raise UserError(f"{where}: 'pairs' must be a non-empty list of pairs [[a, b], ...], got {brief(raw)}")
            pairs = tuple(_pair(p, nodes, where, "pairs") for p in raw)
            return FogEvent(t, kind, pairs=pairs, duration_s=duration)
        raw = entry["groups"]
        if not isinstance(raw, list) or len(raw) != 2:
            raise UserError(f"{where}: 'groups' must be two lists of nodes [[a, ...], [b, ...]], got {brief(raw)}")
        g1, g2 = (_node_list(g, nodes, where, "groups") for g in raw)
        both = set(g1) & set(g2)
        if both:
            raise UserError(f"{where}: 'groups': node {sorted(both)[0]!r} is in both groups")
        pairs = tuple((a, b) for a in g1 for b in g2)
        return FogEvent(t, kind, pairs=pairs, groups=(g1, g2), duration_s=duration)
    if kind == "flap":
        for key in ("pair", "period_s", "down_s"):
            if key not in entry:
                raise UserError(f"{where}: missing '{key}'")
        pair = _pair(entry["pair"], nodes, where, "pair")
        period = float(number(entry, "period_s", None, where, lo=0.0, lo_open=True, hi=MAX_FLAP_PERIOD_S,
                              duration=True))
        down = float(number(entry, "down_s", None, where, lo=0.0, lo_open=True, hi=period, hi_open=True,
                            duration=True))
        return FogEvent(t, kind, nodes=pair, pairs=(pair,), duration_s=_duration(entry, "duration_s", where),
                        period_s=period, down_s=down)
    if kind == "churn":
        for key in ("rate_per_h", "duration_s", "down_s"):
            if key not in entry:
                raise UserError(f"{where}: missing '{key}'")
        rate = float(number(entry, "rate_per_h", None, where, lo=0.0, lo_open=True, hi=MAX_CHURN_RATE_PER_H))
        duration = _duration(entry, "duration_s", where, required=True)
        assert duration is not None
        down = _duration(entry, "down_s", where, required=True)
        seed = int(number(entry, "seed", 0, where, lo=0, hi=MAX_SEED, integer=True))
        expected = rate * duration / 3600.0
        if expected > MAX_CHURN_CRASHES:
            raise UserError(f"{where}: rate_per_h x duration_s is {expected:.0f} crashes; at most "
                            f"{MAX_CHURN_CRASHES} are taken (is the rate per hour?)")
        given = "nodes" in entry
        who = _node_list(entry["nodes"], nodes, where, "nodes") if given else tuple(nodes)
        return FogEvent(t, kind, nodes=who, duration_s=duration, down_s=down, rate_per_h=rate, seed=seed,
                        all_nodes=not given)
    if "node" not in entry:
        raise UserError(f"{where}: missing 'node'")
    node = _node(entry["node"], nodes, where, "node")
    if kind == "crash":
        return FogEvent(t, kind, nodes=(node,), duration_s=_duration(entry, "duration_s", where))
    if kind == "leave":
        drain = float(number(entry, "drain_s", DEFAULT_DRAIN_S, where, lo=0.0, hi=MAX_FLAP_PERIOD_S, duration=True))
        return FogEvent(t, kind, nodes=(node,), drain_s=drain)
    return FogEvent(t, kind, nodes=(node,))


def churn_crashes(event: FogEvent) -> list[FogEvent]:
    """The crashes a churn draws: a Poisson process of `rate_per_h` over its window, each on a node drawn
    uniformly from its nodes, each back after `down_s`. Seeded by the event's seed: the same entry, the same
    crashes."""
    assert event.kind == "churn" and event.rate_per_h and event.duration_s is not None
    rng = np.random.default_rng([int(event.seed or 0), 32])
    mean_gap = 3600.0 / event.rate_per_h
    out: list[FogEvent] = []
    t = event.t_s
    end = event.t_s + event.duration_s
    while len(out) < 2 * MAX_CHURN_CRASHES:
        t += float(rng.exponential(mean_gap))
        if t >= end:
            break
        node = event.nodes[int(rng.integers(len(event.nodes)))]
        out.append(FogEvent(round(t, 3), "crash", nodes=(node,), duration_s=event.down_s))
    return out


class EventSchedule:
    """The state of the fog at any second under a list of events: each node's state and the links that are down.

    Built once per run. A node's first node event being a `join` means it is not in the cluster before (GONE);
    every other node starts UP. Node events apply in time order (declaration order at equal times): crash →
    DOWN (UP again after its duration), leave → LEAVING (GONE after its drain), join → UP. A link is down while
    a partition that cuts it holds, or in the down phase of a flap (the first `down_s` of each `period_s` from
    its start).
    """

    def __init__(self, events: Sequence[FogEvent], names: Iterable[str]) -> None:
        self.events = tuple(events)
        expanded: list[FogEvent] = []
        for e in self.events:
            expanded.extend(churn_crashes(e) if e.kind == "churn" else [e])
        self.names = list(names)
        order = sorted(range(len(expanded)), key=lambda k: (expanded[k].t_s, k))
        self.expanded = [expanded[k] for k in order]
        self._transitions: dict[str, list[tuple[float, int, str]]] = {}
        first: dict[str, str] = {}
        for k, e in enumerate(self.expanded):
            if e.kind not in ("crash", "leave", "join"):
                continue
            node = e.nodes[0]
            first.setdefault(node, e.kind)
            steps = self._transitions.setdefault(node, [])
            if e.kind == "crash":
                steps.append((e.t_s, k, DOWN))
                if e.duration_s is not None:
                    steps.append((e.t_s + e.duration_s, k, UP))
            elif e.kind == "leave":
                steps.append((e.t_s, k, LEAVING))
                steps.append((e.t_s + (e.drain_s or 0.0), k, GONE))
            else:
                steps.append((e.t_s, k, UP))
        self._initial = {n: (GONE if first.get(n) == "join" else UP) for n in self.names}
        for steps in self._transitions.values():
            steps.sort()
        self._times = {n: [s[0] for s in steps] for n, steps in self._transitions.items()}
        self._links = [e for e in self.expanded if e.kind in ("partition", "flap")]

    @property
    def empty(self) -> bool:
        """True when no event changes anything."""
        return not self.expanded

    @property
    def cuts_links(self) -> bool:
        """True when a partition or a flap takes some link down at some time."""
        return bool(self._links)

    def node_state(self, node: str, t: float) -> str:
        """UP, LEAVING, DOWN or GONE at second `t`."""
        times = self._times.get(node)
        if not times:
            return self._initial.get(node, UP)
        k = bisect.bisect_right(times, t)
        return self._initial.get(node, UP) if k == 0 else self._transitions[node][k - 1][2]

    def states(self, t: float) -> dict[str, str]:
        """Every node's state at `t` that is not UP (a large map is mostly up)."""
        out = {n: s for n, s in self._initial.items() if s != UP and n not in self._times}
        for n in self._times:
            s = self.node_state(n, t)
            if s != UP:
                out[n] = s
        return out

    def down_pairs(self, t: float) -> set[frozenset[str]]:
        """The links down at second `t` (partitions in force, flaps in their down phase)."""
        out: set[frozenset[str]] = set()
        for e in self._links:
            if t < e.t_s or (e.duration_s is not None and t >= e.t_s + e.duration_s):
                continue
            if e.kind == "flap":
                assert e.period_s is not None and e.down_s is not None
                if (t - e.t_s) % e.period_s >= e.down_s:
                    continue
            out.update(frozenset(p) for p in e.pairs)
        return out

    def next_change(self, t: float, horizon: float = math.inf) -> float:
        """The first time after `t` (and before `horizon`) at which a node state or a link changes (inf if none)."""
        best = math.inf
        for times in self._times.values():
            k = bisect.bisect_right(times, t)
            if k < len(times):
                best = min(best, times[k])
        for e in self._links:
            end = math.inf if e.duration_s is None else e.t_s + e.duration_s
            if t < e.t_s:
                best = min(best, e.t_s)
                continue
            if t >= end:
                continue
            if e.kind == "partition":
                best = min(best, end)
                continue
            assert e.period_s is not None and e.down_s is not None
            cycle = math.floor((t - e.t_s) / e.period_s)
            start = e.t_s + cycle * e.period_s
            nxt = start + e.down_s if t < start + e.down_s else start + e.period_s
            best = min(best, nxt, end)
        return best if best < horizon else math.inf


def serving_set(replicas: Sequence[str], down: set[frozenset[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(serving, cut off): the replicas that can still work together when the links in `down` are down.

    Replicas exchange data all to all (a shuffle), so the serving set has no down link inside. Taken greedily:
    replicas with the fewest down links to the others first (placement order among equals), each kept when it
    has no down link to one kept before. The others are alive but cut off.
    """
    if not down:
        return tuple(replicas), ()
    cuts = {r: sum(1 for o in replicas if o != r and frozenset((r, o)) in down) for r in replicas}
    order = sorted(range(len(replicas)), key=lambda k: (cuts[replicas[k]], k))
    kept: list[str] = []
    for k in order:
        r = replicas[k]
        if all(frozenset((r, o)) not in down for o in kept):
            kept.append(r)
    keep = set(kept)
    return tuple(r for r in replicas if r in keep), tuple(r for r in replicas if r not in keep)
