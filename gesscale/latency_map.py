"""Latency maps: which nodes exist, the round-trip time between each pair, its link properties and their changes.

One map feeds the WAN emulation (each node's delays), the controller's placement graph and the simulator, so
the network the controller reasons about is the one the cluster is given (docs/pi-cluster.md §3 has the format).

File format (YAML)::

    nodes:
      pi01: {region: umea, lat: 63.83, lon: 20.26}
      pi02: {region: stockholm, lat: 59.33, lon: 18.07}
      pi03: {region: oslo, lat: 59.91, lon: 10.75}
    rtt_ms:                 # required for every pair, unless default_rtt_ms or derive: geo fills it in
      pi01: {pi02: 12.5}
    default_rtt_ms: 50      # optional: used for pairs not listed
    derive: geo             # optional: derive pairs not listed from coordinates
    geo: {stretch: 1.5, base_ms: 1.0}
    symmetry_tolerance_ms: 1.0
    link_defaults: {jitter_ms: 0.5, loss_pct: 0.0, bandwidth_mbit: 1000}   # optional, every pair
    links:                  # optional per-pair overrides of link_defaults (one direction is enough)
      pi01: {pi02: {jitter_ms: 2, loss_pct: 0.1, bandwidth_mbit: 100}}
    changes:                # optional, in time order; t_s = seconds from the start of a run
      - {t_s: 3600, node: pi02, add_rtt_ms: 40, loss_pct: 1}   # every pair of pi02 (a degraded site)
      - {t_s: 7200, pair: [pi01, pi03], rtt_ms: 30, bandwidth_mbit: null}
      - {t_s: 9000, event: crash, node: pi02, duration_s: 600}   # a fog event (gesscale.events, docs/events.md)

`Link` says what each value means for the emulation. A pair may be listed in one direction only. Listed in both
directions, two RTTs must agree within the tolerance (their mean is used), two link properties exactly. Problems
are one `UserError` naming the file and the pair (or the change); a key the format does not have is an error,
not ignored. Triangle-inequality violations are kept as warnings (real WANs have them, e.g. with policy
routing). Jitter above half the RTT is an error, not a warning: each direction's delay is rtt/2 ± jitter, so
the emulation would have to clip it at zero and the measured RTT would no longer be the one the map states.

Storage (gesscale/rtt_table.py): a map that lists every pair, or gives them in a `.npy` matrix (`rtt_matrix:
FILE.npy`, read as a memory map; float = ms, integer = microseconds), is one dense numpy matrix (4 bytes per pair
when every RTT is a whole number of microseconds); a `derive: geo` map stores coordinates and computes rows on
demand, the pairs it lists being sparse overrides. Link properties and the RTTs set by changes are sparse, so a
large map pays only for what it states. For placement, a small map is a networkx graph (`placement_graph`), a
large one is read by rows (numpy); both give the same nodes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from gesscale.errors import UserError, brief
from gesscale.events import EventSchedule, FogEvent, parse_event
from gesscale.inputfile import check_regular
from gesscale.names import check_name
from gesscale.rtt_table import (
    ChangedRtts,
    DenseRtts,
    GeoRtts,
    RttTable,
    chord_for_km,
    estimate_bytes,
    exact_us,
    great_circle_km,
)
from gesscale.yamlfile import read_yaml

# Speed of light in optical fibre: c / n with n ≈ 1.47 → ≈ 204 km per ms; 200 km/ms is the usual rule of thumb.
FIBRE_KM_PER_MS = 200.0
DEFAULT_STRETCH = 1.5  # fibre routes are longer than the great circle (route inflation); 1.5 is conservative
DEFAULT_BASE_MS = 1.0  # switching, last mile and host stack, added once per round trip
# The largest map taken. A dense map holds 4 bytes per pair (10 000 nodes: 0.4 GB), a derived one about 2 kB per
# node; placement reads rows, so neither needs the complete graph in memory. Above MAX_NODES a map is refused up
# front with one line giving the memory it would take (docs/map-scale.md has the measurements).
MAX_NODES = 100_000
# Up to this many nodes the placement reasons on the complete networkx graph (as it always did); above, on the
# map's numpy rows (same rule, same ties: tests/test_placement_numpy.py).
GRAPH_MAX_NODES = 300
# The largest RTT taken, in ms. The longest terrestrial fibre round trip (antipodes, stretched routes) is about
# 400 ms and a geostationary satellite hop about 600 ms; 10 s is past any network a fog cluster crosses, so a
# larger value is a unit mistake (s or us for ms) or a typo, refused rather than emulated. Above
# SUSPICIOUS_RTT_MS (1 s, more than a satellite hop) a map still loads, with a warning.
MAX_RTT_MS = 10_000.0
SUSPICIOUS_RTT_MS = 1_000.0
# Below this (ms) a non-zero RTT is more likely written in seconds (0.010 for 10 ms) than measured: a loopback round
# trip is about 0.02 ms and no two fog hosts are that close. The map loads, with a warning.
TINY_RTT_MS = 0.05


@dataclass(frozen=True)
class Node:
    """A node of the map: its name and where it is (region label and optional coordinates)."""

    name: str
    region: str | None = None
    lat: float | None = None
    lon: float | None = None


def geo_rtt_ms(
    a: Node, b: Node, stretch: float = DEFAULT_STRETCH, base_ms: float = DEFAULT_BASE_MS
) -> float:
    """Round-trip time predicted by a fibre-path model: base + 2 · distance · stretch / (200 km/ms).

    The propagation speed in fibre is about two thirds of c; real routes are longer than the great circle,
    which `stretch` accounts for. Reference for the order of magnitude: Singla et al., "The Internet at the
    Speed of Light", HotNets 2014 (fibre path inflation and c-latency).
    """
    if a.lat is None or a.lon is None or b.lat is None or b.lon is None:
        missing = a.name if a.lat is None or a.lon is None else b.name
        raise UserError(f"cannot derive RTT for pair ({a.name}, {b.name}): node {missing} has no lat/lon")
    if a.name == b.name:
        return 0.0
    km = great_circle_km(a.lat, a.lon, b.lat, b.lon)
    return base_ms + 2.0 * km * stretch / FIBRE_KM_PER_MS


PROPERTY_KEYS = ("jitter_ms", "loss_pct", "bandwidth_mbit")
CHANGE_VALUE_KEYS = ("rtt_ms", "add_rtt_ms", *PROPERTY_KEYS)
MAP_KEYS = (
    "nodes", "rtt_ms", "default_rtt_ms", "derive", "geo", "symmetry_tolerance_ms", "link_defaults", "links",
    "changes", "rtt_matrix",
)
_EPS = 1e-9


@dataclass(frozen=True)
class Link:
    """What one pair's link does to packets: the contract between the map and the emulation engines.

    `rtt_ms`: round-trip time; each direction is delayed by rtt_ms / 2. `jitter_ms`: variation of each
    direction's one-way delay around rtt_ms / 2 (netem's `delay D JITTER`: within ±jitter_ms), so it can be
    at most rtt_ms / 2. `loss_pct`: probability (%) that a packet is dropped, in each direction. `bandwidth_mbit`:
    rate limit of each direction in Mbit/s, None for no limit.
    """

    rtt_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    bandwidth_mbit: float | None = None


@dataclass(frozen=True)
class LinkChange:
    """One entry of a map's `changes:` schedule: from `t_s` seconds after the start of a run, new link values.

    `nodes` is (a, b) for one pair, or (a,) for every pair of node a (a degraded or moved site). `values` holds
    the keys given, among rtt_ms (new RTT), add_rtt_ms (added to the RTT in force) and the link properties.
    """

    t_s: float
    nodes: tuple[str, ...]
    values: tuple[tuple[str, float | None], ...]

    @property
    def where(self) -> str:
        """The pair or node the change applies to, as error messages and reports name it."""
        return f"pair ({self.nodes[0]}, {self.nodes[1]})" if len(self.nodes) == 2 else f"node {self.nodes[0]}"

    def to_dict(self) -> dict[str, Any]:
        """The change in its YAML form."""
        head: dict[str, Any] = {"t_s": self.t_s}
        if len(self.nodes) == 2:
            head["pair"] = list(self.nodes)
        else:
            head["node"] = self.nodes[0]
        return {**head, **dict(self.values)}


Pair = frozenset[str]


@dataclass
class LatencyMap:
    """Nodes, the symmetric RTT (ms) of every pair and its link properties; the input of placement and `tc` plans.

    `rtts` holds the RTTs as written (`gesscale.rtt_table`: a dense matrix, or coordinates plus the pairs given);
    everything else is sparse, so a large map without link properties costs what its RTTs cost: `link_defaults`
    (the map-wide jitter/loss/bandwidth), `links` (per-pair overrides of those), `rtt_changed` (RTTs set by the
    changes in force). `changes` is the whole schedule, of which the first `applied` are in force in this map;
    `time_s` is the time of a run this map stands for (None: before any change). `at(t)` gives the map in force
    at t.
    """

    nodes: dict[str, Node]
    rtts: RttTable
    source: str = "<inline>"
    warnings: list[str] = field(default_factory=list)
    link_defaults: dict[str, float | None] = field(default_factory=dict)
    links: dict[Pair, dict[str, float | None]] = field(default_factory=dict)
    changes: tuple[LinkChange, ...] = ()
    applied: int = 0
    time_s: float | None = None
    rtt_changed: ChangedRtts | None = None
    events: tuple[FogEvent, ...] = ()
    _origin: LatencyMap | None = field(default=None, repr=False, compare=False)
    _documented: LatencyMap | None = field(default=None, repr=False, compare=False)  # see `documented`
    _cache: dict[int, LatencyMap] = field(default_factory=dict, repr=False, compare=False)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.rtt_changed is None:
            self.rtt_changed = ChangedRtts(self.rtts.names, self.rtts.index)

    @property
    def names(self) -> list[str]:
        """Node names in the order the map lists them."""
        return self.rtts.names

    @property
    def index(self) -> dict[str, int]:
        """Each node's position in `names`."""
        return self.rtts.index

    def _idx(self, name: str) -> int:
        try:
            return self.rtts.index[name]
        except KeyError:
            raise UserError(f"{self.source}: unknown node {name!r}") from None

    def rtt(self, a: str, b: str) -> float:
        """RTT in ms between two nodes of the map (0 for a node with itself), as in force in this map."""
        i, j = self._idx(a), self._idx(b)
        if i == j:
            return 0.0
        changed = self.rtt_changed.get_ij(i, j) if self.rtt_changed else None  # type: ignore[union-attr]
        return self.rtts.value(i, j) if changed is None else changed

    def row(self, i: int) -> np.ndarray:
        """RTTs in force (ms, float64) from the node at index i to every node, in map order; do not modify."""
        base = self.rtts.row(i)
        changed = self.rtt_changed
        if changed is None or (not changed.rows and not changed.pairs):
            return base
        return changed.overlay(i, np.array(base))

    def block(self, names: Iterable[str]) -> np.ndarray:
        """The k x k matrix of RTTs in force among some nodes (ms), in the order given."""
        idx = [self._idx(n) for n in names]
        out = self.rtts.block(idx)
        changed = self.rtt_changed
        if changed is not None and (changed.rows or changed.pairs):
            for ka, a in enumerate(idx):
                for kb, b in enumerate(idx):
                    if ka != kb:
                        v = changed.get_ij(a, b)
                        if v is not None:
                            out[ka, kb] = v
        return out

    def link(self, a: str, b: str) -> Link:
        """The link between two nodes: RTT and properties in force (map defaults, then the pair's overrides)."""
        rtt = self.rtt(a, b)
        if a == b:
            return Link(0.0)
        values = {**self.link_defaults, **self.links.get(frozenset((a, b)), {})}
        return Link(
            rtt,
            float(values.get("jitter_ms") or 0.0),
            float(values.get("loss_pct") or 0.0),
            values.get("bandwidth_mbit"),
        )

    @property
    def has_link_properties(self) -> bool:
        """Whether any pair has jitter, loss or a bandwidth limit (in this map or after a scheduled change)."""
        if any(v for v in self.link_defaults.values()) or any(any(v.values()) for v in self.links.values()):
            return True
        return any(k in PROPERTY_KEYS and v for c in self.changes for k, v in c.values)

    @property
    def change_times(self) -> list[float]:
        """The distinct times (s from the start of a run) at which the schedule changes the map, ascending."""
        return sorted({c.t_s for c in self.changes})

    def at(self, t_s: float) -> LatencyMap:
        """The map in force at `t_s` seconds into a run: the map as written with every change at or before t_s.

        Maps returned by `at` share the schedule, so `m.at(t1).at(t2) == m.at(t2)` for any t1, t2. A map with the
        same changes in force is computed once and reused.
        """
        if math.isnan(t_s):
            raise UserError(f"{self.source}: time must be a number, got {t_s}")
        origin = self._origin or self
        k = bisect.bisect_right([c.t_s for c in origin.changes], t_s)
        if k == 0:
            return origin
        cached = origin._cache.get(k)
        if cached is None:
            cached = origin._derive(k)
            origin._cache[k] = cached
        return cached

    def _derive(self, k: int) -> LatencyMap:
        """This (as written) map with its first k changes applied; validated at load, so nothing raises here."""
        assert self.rtt_changed is not None
        state = _State(self.nodes, self.rtts, self.rtt_changed.copy(), {p: dict(v) for p, v in self.links.items()})
        for change in self.changes[:k]:
            state.apply(change, self.link_defaults, self.source)
        return LatencyMap(
            self.nodes, self.rtts, self.source, list(self.warnings), dict(self.link_defaults), state.links,
            self.changes, k, self.changes[k - 1].t_s, state.rtt_changed, self.events, _origin=self,
        )

    @property
    def documented(self) -> LatencyMap:
        """The map as its file documents it (as written, its own `changes:` included), without the entries
        `with_events` merged in from an events file or an experiment's `events:`: what the operator's map says,
        the controller's view with `--latency-source map` (docs/events.md). The map itself when none were merged."""
        origin = self._origin or self
        return origin._documented if origin._documented is not None else origin

    def schedule(self) -> EventSchedule:
        """The fog events of this map (partitions, flaps, node crashes, leaves, joins, churn) as one schedule,
        built once and shared by every map `at` returns."""
        origin = self._origin or self
        sched = origin._memo.get("events")
        if sched is None:
            sched = origin._memo["events"] = EventSchedule(origin.events, origin.names)
        return sched

    def unapplied_events(self, command: str, applied: Iterable[str] = ()) -> str | None:
        """The warning a command prints for the fog events of this map it does not apply (None: none), the kinds
        in `applied` left out (`gesscale netem` applies partitions and flaps)."""
        left = [e for e in self.events if e.kind not in set(applied)]
        if not left:
            return None
        kinds = ", ".join(sorted({e.kind for e in left}))
        return (f"{self.source}: {len(left)} fog event(s) ({kinds}) in changes: are not applied by "
                f"`gesscale {command}` (the simulator only, for now: docs/events.md)")

    def with_events(self, raw: Any, source: str, key: str = "events") -> LatencyMap:
        """This map (as written) with more entries of the events schema (`gesscale.events`: link changes and fog
        events, e.g. a `--events FILE` or an experiment's `events:`) merged into its schedule by time; checked
        as the map's own `changes:` are."""
        origin = self._origin or self
        changes, events = _parse_changes(raw, origin.nodes, source, key)
        if not changes and not events:
            return origin
        merged = tuple(sorted((*origin.changes, *changes), key=lambda c: c.t_s))
        _check_schedule(origin.nodes, origin.rtts, origin.links, origin.link_defaults, merged, f"{source}: {key}")
        return LatencyMap(
            origin.nodes, origin.rtts, origin.source, list(origin.warnings), dict(origin.link_defaults),
            {p: dict(v) for p, v in origin.links.items()}, merged,
            events=tuple(sorted((*origin.events, *events), key=lambda e: e.t_s)), _documented=origin.documented,
        )

    def nd_max(self, names: Iterable[str]) -> float:
        """ND_max of a set of nodes: the largest RTT among its pairs (0 for fewer than two nodes)."""
        chosen = list(names)
        if len(chosen) < 2:
            for n in chosen:
                self._idx(n)
            return 0.0
        return float(self.block(chosen).max())

    def graph(self) -> nx.Graph:
        """The complete weighted graph of the map: node attributes region/lat/lon, edge weight = RTT ms in force.

        For analysis and figures, and the placement graph of small maps; it stores every pair as Python objects
        (about 230 bytes each), so large maps are placed on their rows instead (`placement_graph`).
        """
        g = nx.Graph()
        for node in self.nodes.values():
            g.add_node(node.name, region=node.region, lat=node.lat, lon=node.lon)
        names = self.names
        for i, a in enumerate(names):
            r = self.row(i)
            for j in range(i + 1, len(names)):
                b = names[j]
                x, y = (a, b) if a < b else (b, a)
                g.add_edge(x, y, weight=float(r[j]))
        return g

    def placement_graph(self) -> nx.Graph | LatencyMap:
        """What the placement reasons on: the networkx graph up to GRAPH_MAX_NODES nodes, else this map (rows).

        Built once per map, so the control loop and the simulator share it.
        """
        if len(self.nodes) > GRAPH_MAX_NODES:
            return self
        g = self._memo.get("graph")
        if g is None:
            g = self._memo["graph"] = self.graph()
        return g

    def memo(self) -> dict[str, Any]:
        """A per-map scratch space for values computed once from the map in force (placement's column sums)."""
        return self._memo

    def matrix(self) -> list[list[float]]:
        """RTT matrix in the order of `names`."""
        return [[float(v) for v in self.row(i)] for i in range(len(self.names))]

    def array(self) -> np.ndarray:
        """RTT matrix in force (float64, N x N): for small maps and analysis (8 bytes per pair)."""
        return np.stack([np.asarray(self.row(i), dtype=np.float64) for i in range(len(self.names))])

    def subset(self, names: Iterable[str]) -> LatencyMap:
        """The map restricted to some of its nodes, with the changes still to come that concern only them."""
        keep = list(names)
        for n in keep:
            if n not in self.nodes:
                raise UserError(f"{self.source}: unknown node {n!r}")
        kept = set(keep)
        index = {n: i for i, n in enumerate(keep)}
        rtts = DenseRtts.from_ms(keep, index, self.block(keep))
        links = {p: dict(v) for p, v in self.links.items() if p <= kept}
        changes = tuple(c for c in self.changes[self.applied :] if set(c.nodes) <= kept)
        events = tuple(e for e in self.events if set(e.nodes) <= kept and all(set(p) <= kept for p in e.pairs))
        return LatencyMap(
            {n: self.nodes[n] for n in keep}, rtts, self.source, list(self.warnings), dict(self.link_defaults),
            links, changes, events=events,
        )

    def to_dict(self) -> dict[str, Any]:
        """The map in its YAML form: every pair explicit (one direction), its link properties and the changes
        still to come; loading it gives back this map."""
        nodes: dict[str, Any] = {}
        for node in self.nodes.values():
            nodes[node.name] = {
                k: v for k, v in (("region", node.region), ("lat", node.lat), ("lon", node.lon)) if v is not None
            }
        rtt: dict[str, dict[str, float]] = {}
        names = self.names
        for i, a in enumerate(names):
            r = self.row(i)
            row = {names[j]: round(float(r[j]), 3) for j in range(i + 1, len(names))}
            if row:
                rtt[a] = row
        out: dict[str, Any] = {"nodes": nodes, "rtt_ms": rtt}
        if self.link_defaults:
            out["link_defaults"] = dict(self.link_defaults)
        if self.links:
            out["links"] = self.to_dict_links()
        remaining = self._schedule_dicts()
        if remaining:
            out["changes"] = remaining
        return out

    def _schedule_dicts(self) -> list[dict[str, Any]]:
        """The link changes still to come and every fog event, in time order, in their YAML form."""
        entries = [*((c.t_s, c.to_dict()) for c in self.changes[self.applied :]),
                   *((e.t_s, e.to_dict()) for e in self.events)]
        return [d for _, d in sorted(entries, key=lambda x: x[0])]

    def to_dict_links(self) -> dict[str, dict[str, Any]]:
        """`links:` in YAML form, each pair once, from its node first in map order."""
        order = self.index
        links: dict[str, dict[str, Any]] = {}
        for pair, values in self.links.items():
            a, b = sorted(pair, key=order.__getitem__)
            links.setdefault(a, {})[b] = dict(values)
        return links


    def to_record(self, used: Iterable[str] = ()) -> dict[str, Any]:
        """The map for a record (a bundle's network.json): `to_dict` up to GRAPH_MAX_NODES nodes; above, what grows
        with N and the nodes used, not N^2 values: the nodes, how unlisted pairs are derived, the pairs given, the
        link properties, the changes still to come, and the rows (RTT in force to every node, in map order) of the
        `used` nodes."""
        if len(self.nodes) <= GRAPH_MAX_NODES:
            return self.to_dict()
        nodes = {n.name: {k: v for k, v in (("region", n.region), ("lat", n.lat), ("lon", n.lon)) if v is not None}
                 for n in self.nodes.values()}
        out: dict[str, Any] = {"nodes": nodes}
        table = self.rtts
        if isinstance(table, GeoRtts):
            out["derive"] = "geo"
            out["geo"] = {"stretch": table.stretch, "base_ms": table.base_ms}
            given: dict[str, dict[str, float]] = {}
            for (i, j), v in sorted(table.given.items()):
                given.setdefault(self.names[i], {})[self.names[j]] = v
            if given:
                out["rtt_ms"] = given
        else:
            out["rtt_matrix"] = f"{len(self.names)}x{len(self.names)} dense matrix, not recorded: see rows"
        if self.link_defaults:
            out["link_defaults"] = dict(self.link_defaults)
        if self.links:
            out["links"] = self.to_dict_links()
        remaining = self._schedule_dicts()
        if remaining:
            out["changes"] = remaining
        keep = sorted(set(used), key=self.index.__getitem__)
        out["rows"] = {n: [round(float(x), 3) for x in self.row(self.index[n])] for n in keep}
        return out

class _State:
    """The mutable RTT and property overrides while a schedule is applied (at load, to validate it; in `at`)."""

    def __init__(
        self,
        nodes: Mapping[str, Node],
        rtts: RttTable,
        rtt_changed: ChangedRtts,
        links: dict[Pair, dict[str, float | None]],
    ) -> None:
        self.nodes, self.rtts, self.rtt_changed, self.links = nodes, rtts, rtt_changed, links

    def _in_force(self, i: int, j: int) -> float:
        v = self.rtt_changed.get_ij(i, j)
        return self.rtts.value(i, j) if v is None else v

    def apply(self, change: LinkChange, defaults: Mapping[str, float | None], where: str) -> None:
        """Apply one change and check each pair it touches (RTT not negative, jitter at most RTT / 2)."""
        values = dict(change.values)
        props = {k: v for k, v in values.items() if k in PROPERTY_KEYS}
        index = self.rtts.index
        if len(change.nodes) == 2:
            self._apply_pair(change, index[change.nodes[0]], index[change.nodes[1]], values, props, defaults, where)
            return
        a = change.nodes[0]
        i = index[a]
        names = self.rtts.names
        row = self.rtt_changed.overlay(i, np.array(self.rtts.row(i)))
        if "rtt_ms" in values:
            row = np.full(len(names), float(values["rtt_ms"]))  # type: ignore[arg-type]
        elif "add_rtt_ms" in values:
            row = row + float(values["add_rtt_ms"])  # type: ignore[arg-type]
        row[i] = 0.0
        if props:
            for b in names:
                if b != a:
                    pair = frozenset((a, b))
                    self.links[pair] = {**self.links.get(pair, {}), **props}
        jitter = np.full(len(names), float(defaults.get("jitter_ms") or 0.0))
        for pair, v in self.links.items():
            if a in pair and "jitter_ms" in v:
                (b,) = pair - {a}
                jitter[index[b]] = float(v["jitter_ms"] or 0.0)
        negative = row < 0 if "add_rtt_ms" in values else np.zeros(len(names), dtype=bool)
        bad = negative | (jitter > row / 2 + _EPS)
        bad[i] = False
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            pair = frozenset((a, names[j]))
            if negative[j]:
                x, y = _ordered(pair, self.nodes)
                raise UserError(
                    f"{where} at t_s {change.t_s:g}: pair ({x}, {y}): add_rtt_ms "
                    f"{values['add_rtt_ms']:g} makes the RTT negative ({row[j]:g} ms)"
                )
            _check_jitter(float(jitter[j]), float(row[j]), pair, self.nodes, f"{where} at t_s {change.t_s:g}")
        if "rtt_ms" in values or "add_rtt_ms" in values:
            self.rtt_changed.set_row(i, row)

    def _apply_pair(self, change: LinkChange, i: int, j: int, values: dict[str, float | None],
                    props: dict[str, float | None], defaults: Mapping[str, float | None], where: str) -> None:
        pair = frozenset(change.nodes)
        rtt = self._in_force(i, j)
        if "rtt_ms" in values:
            rtt = float(values["rtt_ms"])  # type: ignore[arg-type]
        elif "add_rtt_ms" in values:
            rtt += float(values["add_rtt_ms"])  # type: ignore[arg-type]
            if rtt < 0:
                a, b = _ordered(pair, self.nodes)
                raise UserError(
                    f"{where} at t_s {change.t_s:g}: pair ({a}, {b}): add_rtt_ms "
                    f"{values['add_rtt_ms']:g} makes the RTT negative ({rtt:g} ms)"
                )
        if "rtt_ms" in values or "add_rtt_ms" in values:
            self.rtt_changed.set_pair(i, j, rtt)
        if props:
            self.links[pair] = {**self.links.get(pair, {}), **props}
        jitter = {**defaults, **self.links.get(pair, {})}.get("jitter_ms") or 0.0
        _check_jitter(jitter, rtt, pair, self.nodes, f"{where} at t_s {change.t_s:g}")


def _ordered(pair: Pair, nodes: Mapping[str, Node]) -> tuple[str, str]:
    """A pair's two nodes in map order, for messages."""
    order = {n: i for i, n in enumerate(nodes)}
    a, b = sorted(pair, key=order.__getitem__)
    return a, b


def _check_jitter(jitter: float, rtt: float, pair: Pair, nodes: Mapping[str, Node], where: str) -> None:
    """Jitter is a ± spread of each direction's delay rtt / 2; beyond it the delay would have to be negative."""
    if jitter > rtt / 2 + _EPS:
        a, b = _ordered(pair, nodes)
        raise UserError(
            f"{where}: pair ({a}, {b}): jitter_ms {jitter:g} exceeds half the RTT ({rtt:g} ms): each direction's "
            f"delay is rtt/2 ± jitter and cannot be negative (lower jitter_ms for this pair in links:)"
        )


def _number(value: Any, where: str, what: str = "RTT") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: {what} must be a number, got {brief(value)}")
    if isinstance(value, int) and abs(value) > 10**18:  # math.isnan would overflow on it
        raise UserError(f"{where}: {what} must be finite and at most {MAX_RTT_MS:g}, got a {len(str(value))}-digit "
                        "number")
    if math.isnan(value) or math.isinf(value):
        raise UserError(f"{where}: {what} must be finite, got {value!r}")
    if value < 0:
        raise UserError(f"{where}: {what} must not be negative, got {value}")
    if what in ("RTT", "rtt_ms") and value > MAX_RTT_MS:
        raise UserError(f"{where}: {what} {value:g} ms is above {MAX_RTT_MS:g} ms, the largest RTT taken (a "
                        "satellite hop is ~600 ms: is the unit ms?)")
    return float(value)


def _property(key: str, value: Any, where: str) -> float | None:
    """One link property, checked: jitter ≥ 0, loss in [0, 100], bandwidth > 0 or null (no limit)."""
    if key == "bandwidth_mbit":
        if value is None:
            return None
        bw = _number(value, where, key)
        if bw <= 0:
            raise UserError(f"{where}: bandwidth_mbit must be > 0 (or null for no limit), got {value}")
        return bw
    number = _number(value, where, key)
    if key == "loss_pct" and number > 100:
        raise UserError(f"{where}: loss_pct must be in [0, 100], got {value}")
    return number


def _properties(raw: Any, where: str, allowed: tuple[str, ...] = PROPERTY_KEYS) -> dict[str, float | None]:
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: must be a mapping of {', '.join(allowed)}, got {raw!r}")
    unknown = [str(k) for k in raw if k not in allowed]
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(allowed)})")
    return {str(k): _property(str(k), v, where) for k, v in raw.items()}


def _parse_nodes(raw: Any, source: str) -> dict[str, Node]:
    if raw is None:
        raise UserError(f"{source}: missing 'nodes'")
    if isinstance(raw, list):
        raw = {str(n): {} for n in raw}
    if not isinstance(raw, Mapping) or not raw:
        raise UserError(f"{source}: 'nodes' must be a non-empty mapping of node name to attributes")
    nodes: dict[str, Node] = {}
    for name, attrs in raw.items():
        name = check_name("node", str(name), f"{source}: nodes")  # it reaches scripts, file names and configs
        attrs = attrs or {}
        if not isinstance(attrs, Mapping):
            raise UserError(f"{source}: node {name!r}: attributes must be a mapping (region, lat, lon)")
        unknown = [str(k) for k in attrs if k not in ("region", "lat", "lon")]
        if unknown:
            raise UserError(f"{source}: node {name!r}: unknown key {unknown[0]!r} (expected region, lat, lon)")
        lat, lon = attrs.get("lat"), attrs.get("lon")
        for key, val in (("lat", lat), ("lon", lon)):
            if val is not None and (isinstance(val, bool) or not isinstance(val, int | float)):
                raise UserError(f"{source}: node {name!r}: {key} must be a number, got {val!r}")
        if lat is not None and not -90 <= lat <= 90:
            raise UserError(f"{source}: node {name!r}: lat {lat} outside [-90, 90]")
        if lon is not None and not -180 <= lon <= 180:
            raise UserError(f"{source}: node {name!r}: lon {lon} outside [-180, 180]")
        region = attrs.get("region")
        if region is not None:
            check_name("region", str(region), f"{source}: node {name}: region")
        nodes[str(name)] = Node(
            str(name),
            None if region is None else str(region),
            None if lat is None else float(lat),
            None if lon is None else float(lon),
        )
    return nodes


def _parse_links(raw: Any, nodes: Mapping[str, Node], source: str) -> dict[Pair, dict[str, float | None]]:
    """`links: {a: {b: {jitter_ms: .., loss_pct: .., bandwidth_mbit: ..}}}`; a pair listed both ways must agree."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UserError(f"{source}: 'links' must be a mapping: node -> {{peer: {{{', '.join(PROPERTY_KEYS)}}}}}")
    links: dict[Pair, dict[str, float | None]] = {}
    for a, row in raw.items():
        a = str(a)
        if a not in nodes:
            raise UserError(f"{source}: links names unknown node {a!r}")
        if not isinstance(row, Mapping):
            raise UserError(f"{source}: links.{a} must be a mapping of peer -> link properties")
        for b, values in row.items():
            b = str(b)
            where = f"{source}: links pair ({a}, {b})"
            if b not in nodes:
                raise UserError(f"{where}: unknown node {b!r}")
            if a == b:
                raise UserError(f"{where}: a node has no link to itself")
            props = _properties(values, where)
            pair = frozenset((a, b))
            before = links.get(pair, {})
            for key, value in props.items():
                if key in before and before[key] != value:
                    raise UserError(f"{where}: {key} listed in both directions with different values "
                                    f"({before[key]} vs {value})")
            links[pair] = {**before, **props}
    return links


def _parse_changes(raw: Any, nodes: Mapping[str, Node], source: str,
                   key: str = "changes") -> tuple[tuple[LinkChange, ...], tuple[FogEvent, ...]]:
    """`changes: [{t_s: 3600, node: a | pair: [a, b], rtt_ms | add_rtt_ms, jitter_ms, loss_pct, bandwidth_mbit}]`
    and the fog events among them (an entry with `event:`, `gesscale.events`): (link changes, events)."""
    if raw is None:
        return (), ()
    if not isinstance(raw, list):
        raise UserError(f"{source}: '{key}' must be a list of {{t_s, node or pair, new values}} or "
                        "{t_s, event, ...}")
    out: list[LinkChange] = []
    events: list[FogEvent] = []
    allowed = ("t_s", "event", "node", "pair", *CHANGE_VALUE_KEYS)
    last = -math.inf
    for i, entry in enumerate(raw):
        where = f"{source}: {key}[{i}]"
        if not isinstance(entry, Mapping):
            raise UserError(f"{where}: must be a mapping {{t_s, node or pair, new values}}, got {brief(entry)}")
        if entry.get("event", "link") != "link":
            event = parse_event(entry, nodes, where)
            if event.t_s < last:
                raise UserError(f"{where}: out of time order ({key}[{i - 1}] is at t_s {last:g}); list "
                                f"{key} by increasing t_s")
            last = event.t_s
            events.append(event)
            continue
        unknown = [str(k) for k in entry if k not in allowed]
        if unknown:
            raise UserError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(allowed)})")
        if "t_s" not in entry:
            raise UserError(f"{where}: missing t_s (seconds from the start of a run)")
        t = entry["t_s"]
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise UserError(f"{where}: t_s must be a finite number of seconds, got {t!r}")
        if t < 0:
            raise UserError(f"{where}: t_s must not be negative (seconds from the start of a run), got {t}")
        if ("node" in entry) == ("pair" in entry):
            raise UserError(f"{where}: give either node (every pair of a node) or pair: [a, b]")
        if "node" in entry:
            who: tuple[str, ...] = (str(entry["node"]),)
        else:
            pair = entry["pair"]
            if not isinstance(pair, list) or len(pair) != 2:
                raise UserError(f"{where}: pair must be a list of two nodes [a, b], got {pair!r}")
            who = (str(pair[0]), str(pair[1]))
            if who[0] == who[1]:
                raise UserError(f"{where}: pair ({who[0]}, {who[1]}): a node has no link to itself")
        label = f"pair ({who[0]}, {who[1]})" if len(who) == 2 else f"node {who[0]}"
        where = f"{where} (t_s {t:g}, {label})"
        for n in who:
            if n not in nodes:
                raise UserError(f"{where}: unknown node {n!r}")
        values: list[tuple[str, float | None]] = []
        if "rtt_ms" in entry and "add_rtt_ms" in entry:
            raise UserError(f"{where}: give rtt_ms (new RTT) or add_rtt_ms (added to the RTT in force), not both")
        if "rtt_ms" in entry:
            values.append(("rtt_ms", _number(entry["rtt_ms"], where, "rtt_ms")))
        if "add_rtt_ms" in entry:
            add = entry["add_rtt_ms"]
            if isinstance(add, bool) or not isinstance(add, int | float) or not math.isfinite(add):
                raise UserError(f"{where}: add_rtt_ms must be a finite number, got {add!r}")
            if abs(add) > MAX_RTT_MS:
                raise UserError(f"{where}: add_rtt_ms {add:g} is beyond ±{MAX_RTT_MS:g} ms, the largest RTT taken")
            values.append(("add_rtt_ms", float(add)))
        values += [(k, _property(k, entry[k], where)) for k in PROPERTY_KEYS if k in entry]
        if not values:
            raise UserError(f"{where}: no new value (give {', '.join(CHANGE_VALUE_KEYS)})")
        if t < last:
            raise UserError(f"{where}: out of time order ({key}[{i - 1}] is at t_s {last:g}); "
                            f"list {key} by increasing t_s")
        last = t
        out.append(LinkChange(float(t), who, tuple(values)))
    return tuple(out), tuple(events)


def _check_schedule(nodes: Mapping[str, Node], rtts: RttTable, links: Mapping[Pair, Mapping[str, float | None]],
                    link_defaults: Mapping[str, float | None], changes: Sequence[LinkChange], where: str) -> None:
    """Apply the whole schedule once, so that a change that makes a link impossible is caught at load."""
    if not changes:
        return
    names = list(nodes)
    index = {n: i for i, n in enumerate(names)}
    state = _State(nodes, rtts, ChangedRtts(names, index), {p: dict(v) for p, v in links.items()})
    for i, change in enumerate(changes):
        state.apply(change, link_defaults, f"{where}[{i}]")


def latency_map_from_dict(data: Any, source: str = "<inline>", *, other_keys: Iterable[str] = (),
                          base_dir: str | Path | None = None) -> LatencyMap:
    """Build and validate a latency map from its parsed YAML form (see the module docstring).

    `other_keys` are keys the caller's own document may hold beside the map's (a scenario's inline cluster);
    any other unknown key is an error, so a misspelled one is never silently ignored. `base_dir` is where a
    relative `rtt_matrix:` file is found (the map file's folder; the working directory by default).
    """
    if not isinstance(data, Mapping):
        raise UserError(f"{source}: a latency map must be a mapping with 'nodes' and 'rtt_ms'")
    known = (*MAP_KEYS, *other_keys)
    unknown = [str(k) for k in data if k not in known]
    if unknown:
        raise UserError(f"{source}: unknown key {unknown[0]!r} (a latency map has {', '.join(MAP_KEYS)})")
    raw_nodes = data.get("nodes")
    if isinstance(raw_nodes, Mapping | list) and len(raw_nodes) > MAX_NODES:
        n = len(raw_nodes)
        raise UserError(f"{source}: {n} nodes; at most {MAX_NODES} are supported (this map would take about "
                        f"{_gb(estimate_bytes(n, data.get('derive') != 'geo'))} in memory, "
                        f"{_gb(estimate_bytes(n, False))} derived from coordinates)")
    nodes = _parse_nodes(raw_nodes, source)
    tolerance = data.get("symmetry_tolerance_ms", 1.0)
    tolerance = _number(tolerance, f"{source}: symmetry_tolerance_ms")
    default = data.get("default_rtt_ms")
    if default is not None:
        default = _number(default, f"{source}: default_rtt_ms")
    derive = data.get("derive")
    if derive not in (None, "geo"):
        raise UserError(f"{source}: derive must be 'geo' (from coordinates), got {derive!r}")
    geo = data.get("geo") or {}
    if not isinstance(geo, Mapping):
        raise UserError(f"{source}: 'geo' must be a mapping with stretch and base_ms")
    unknown = [str(k) for k in geo if k not in ("stretch", "base_ms")]
    if unknown:
        raise UserError(f"{source}: geo: unknown key {unknown[0]!r} (expected stretch, base_ms)")
    stretch = _number(geo.get("stretch", DEFAULT_STRETCH), f"{source}: geo.stretch")
    base_ms = _number(geo.get("base_ms", DEFAULT_BASE_MS), f"{source}: geo.base_ms")

    names = list(nodes)
    index = {n: i for i, n in enumerate(names)}
    given = _parse_given(data.get("rtt_ms"), nodes, index, tolerance, source)
    if data.get("rtt_matrix") is not None:
        if given or derive or default is not None:
            raise UserError(f"{source}: rtt_matrix gives every pair: do not combine it with rtt_ms, "
                            "default_rtt_ms or derive")
        rtts: RttTable = _read_matrix(data["rtt_matrix"], names, index, tolerance, source, base_dir)
    elif derive == "geo":
        rtts = _geo_table(nodes, names, index, stretch, base_ms, given, source)
    else:
        rtts = _dense_table(names, index, given, default, source)

    raw_defaults = data.get("link_defaults")
    link_defaults = {} if raw_defaults is None else _properties(raw_defaults, f"{source}: link_defaults")
    links = _parse_links(data.get("links"), nodes, source)
    _check_all_jitter(rtts, link_defaults, links, nodes, source)
    changes, events = _parse_changes(data.get("changes"), nodes, source)
    _check_schedule(nodes, rtts, links, link_defaults, changes, f"{source}: changes")

    result = LatencyMap(nodes, rtts, source, [], link_defaults, links, changes, events=events)
    count, first = _pairs_above(rtts, SUSPICIOUS_RTT_MS)
    if count:
        a, b = sorted((names[first[0]], names[first[1]]))
        result.warnings.append(f"{source}: {count} pair(s) above {SUSPICIOUS_RTT_MS:g} ms, e.g. ({a}, {b}) "
                               f"at {rtts.value(*first):g} ms: longer than a satellite hop; is the unit ms?")
    tiny = [p for p in _pairs_below(rtts, TINY_RTT_MS) if rtts.value(*p) > 0]
    if tiny:
        a, b = sorted((names[tiny[0][0]], names[tiny[0][1]]))
        result.warnings.append(f"{source}: {len(tiny)} pair(s) below {TINY_RTT_MS:g} ms, e.g. ({a}, {b}) at "
                               f"{rtts.value(*tiny[0]):g} ms: RTTs are in ms (write 10 for 10 ms, not 0.010 s)")
    result.warnings.extend(triangle_violations(result))
    return result


def _gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.0f} MB"


def _dense_table(names: list[str], index: dict[str, int], given: dict[tuple[int, int], float],
                 default: float | None, source: str) -> DenseRtts:
    """A listed map (every pair given, or the others at default_rtt_ms) as one matrix, built in its final type."""
    n = len(names)
    if default is None and len(given) < n * (n - 1) // 2:
        have = np.zeros((n, n), dtype=bool)
        for i, j in given:
            have[i, j] = True
        i, j = (int(x) for x in np.argwhere(np.triu(~have, 1))[0])
        raise UserError(
            f"{source}: missing RTT for pair ({names[i]}, {names[j]}) (list it, or set default_rtt_ms or derive: geo)"
        )
    values = np.fromiter(given.values(), dtype=np.float64, count=len(given))
    fill = 0.0 if default is None else float(default)
    integer = exact_us(np.append(values, fill))
    mat = np.full((n, n), round(fill * 1000) if integer else fill, dtype=np.int32 if integer else np.float64)
    if given:
        ij = np.array(list(given), dtype=np.intp)
        vals = np.rint(values * 1000).astype(np.int32) if integer else values
        mat[ij[:, 0], ij[:, 1]] = vals
        mat[ij[:, 1], ij[:, 0]] = vals
    np.fill_diagonal(mat, 0)
    return DenseRtts(names, index, mat, measured=None if default is None else sorted(given))


def _parse_given(raw: Any, nodes: Mapping[str, Node], index: Mapping[str, int], tolerance: float,
                 source: str) -> dict[tuple[int, int], float]:
    """The pairs `rtt_ms` lists, by index (i < j); both directions must agree within the tolerance (mean kept)."""
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise UserError(f"{source}: 'rtt_ms' must be a mapping: node -> {{peer: rtt}}")
    given: dict[tuple[str, str], float] = {}
    for a, row in raw.items():
        a = str(a)
        if a not in nodes:
            raise UserError(f"{source}: rtt_ms names unknown node {a!r}")
        if not isinstance(row, Mapping):
            raise UserError(f"{source}: rtt_ms.{a} must be a mapping of peer -> RTT")
        for b, value in row.items():
            b = str(b)
            if b not in nodes:
                raise UserError(f"{source}: pair ({a}, {b}): unknown node {b!r}")
            rtt = _number(value, f"{source}: pair ({a}, {b})")
            if a == b:
                if rtt != 0:
                    raise UserError(f"{source}: pair ({a}, {b}): a node's RTT to itself must be 0")
                continue
            given[(a, b)] = rtt
    out: dict[tuple[int, int], float] = {}
    asymmetric: list[tuple[int, int, float, float]] = []
    for (a, b), ab in given.items():
        i, j = index[a], index[b]
        if i > j:
            if (b, a) in given:
                continue  # met from the other side
            out[(j, i)] = ab
            continue
        ba = given.get((b, a))
        if ba is None:
            out[(i, j)] = ab
        elif abs(ab - ba) > tolerance:
            asymmetric.append((i, j, ab, ba))
        else:
            out[(i, j)] = (ab + ba) / 2
    if asymmetric:
        i, j, ab, ba = min(asymmetric)
        names = list(index)
        raise UserError(
            f"{source}: pair ({names[i]}, {names[j]}) is asymmetric: {ab} ms vs {ba} ms (tolerance {tolerance} ms)"
        )
    return out


def _geo_table(nodes: Mapping[str, Node], names: list[str], index: dict[str, int], stretch: float, base_ms: float,
               given: dict[tuple[int, int], float], source: str) -> GeoRtts:
    """A derived map: coordinates, the fibre model and the given pairs; a node without coordinates needs all its
    pairs given."""
    n = len(names)
    lat = np.array([np.nan if nodes[a].lat is None else nodes[a].lat for a in names], dtype=float)
    lon = np.array([np.nan if nodes[a].lon is None else nodes[a].lon for a in names], dtype=float)
    lacking = np.flatnonzero(np.isnan(lat) | np.isnan(lon))
    for k in lacking:  # the first pair, in map order, that would have to be derived from a missing coordinate
        k = int(k)
        missing = [(min(k, j), max(k, j)) for j in range(n) if j != k and (min(k, j), max(k, j)) not in given]
        if missing:
            i, j = min(missing)
            bad = names[i] if i in lacking else names[j]
            raise UserError(f"cannot derive RTT for pair ({names[i]}, {names[j]}): node {bad} has no lat/lon")
    return GeoRtts(names, index, np.nan_to_num(lat), np.nan_to_num(lon), stretch, base_ms, given)


def _read_matrix(ref: Any, names: list[str], index: dict[str, int], tolerance: float, source: str,
                 base_dir: str | Path | None) -> DenseRtts:
    """`rtt_matrix: FILE.npy`: an N x N matrix in map order (float: ms; integer: microseconds), memory-mapped.

    Checked in row blocks (finite, not negative, at most MAX_RTT_MS, zero diagonal, symmetric within the
    tolerance); an exactly symmetric matrix stays a memory map, another is averaged into memory.
    """
    if not isinstance(ref, str) or not ref.endswith(".npy"):
        raise UserError(f"{source}: rtt_matrix must name a .npy file, got {brief(ref)}")
    path = Path(ref) if Path(ref).is_absolute() or base_dir is None else Path(base_dir) / ref
    try:
        check_regular(path, "rtt_matrix")  # a FIFO would block the open, a device never end
        mat = np.load(path, mmap_mode="r", allow_pickle=False)
    except UserError as err:
        raise UserError(f"{source}: {err}") from None
    except (ValueError, OSError, EOFError) as err:  # EOFError: an empty or cut file
        raise UserError(f"{source}: rtt_matrix {path} is not a readable .npy file ({brief(str(err))})") from None
    n = len(names)
    if mat.ndim != 2 or mat.shape != (n, n):
        shape = "x".join(map(str, mat.shape)) or "a single value"
        raise UserError(f"{source}: rtt_matrix {path} is {shape}, the map has {n} nodes (expected {n}x{n})")
    # Plain integers (microseconds) or floats (ms) only: a bool, a timedelta (numpy counts it an integer), a
    # date, text or a record is not an RTT.
    integer = mat.dtype.kind in "iu"
    if mat.dtype.kind not in "iuf":
        raise UserError(f"{source}: rtt_matrix {path} holds {mat.dtype}: give float ms or integer microseconds")
    scale = 1000.0 if integer else 1.0
    exact = True
    step = max(1, 4_000_000 // max(n, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        rows = np.asarray(mat[lo:hi], dtype=np.float64) / scale
        cols = np.asarray(mat[:, lo:hi], dtype=np.float64).T / scale
        bad = ~np.isfinite(rows) | (rows < 0) | (rows > MAX_RTT_MS)
        if bad.any():
            r, c = (int(x) for x in np.argwhere(bad)[0])
            raise UserError(f"{source}: rtt_matrix pair ({names[lo + r]}, {names[c]}): RTT must be finite, not "
                            f"negative and at most {MAX_RTT_MS:g} ms, got {rows[r, c]}")
        diag = rows[np.arange(hi - lo), np.arange(lo, hi)]
        if np.any(diag != 0):
            r = int(np.flatnonzero(diag != 0)[0])
            raise UserError(f"{source}: rtt_matrix pair ({names[lo + r]}, {names[lo + r]}): a node's RTT to itself "
                            "must be 0")
        diff = np.abs(rows - cols)
        if np.any(diff > tolerance):
            r, c = (int(x) for x in np.argwhere(diff > tolerance)[0])
            a, b = sorted((lo + r, c))
            raise UserError(f"{source}: pair ({names[a]}, {names[b]}) is asymmetric: {mat[a, b] / scale} ms vs "
                            f"{mat[b, a] / scale} ms (tolerance {tolerance} ms)")
        exact = exact and not np.any(diff)
    if exact:
        return DenseRtts(names, index, mat) if integer or mat.dtype == np.float64 else \
            DenseRtts.from_ms(names, index, np.asarray(mat, dtype=np.float64))
    full = np.asarray(mat, dtype=np.float64) / scale
    return DenseRtts.from_ms(names, index, (full + full.T) / 2)


def write_rtt_matrix(lmap: LatencyMap, path: str | Path) -> None:
    """Write a map's RTTs in force as an `rtt_matrix:` file: int32 microseconds when exact, else float64 ms."""
    ms = lmap.array()
    table = DenseRtts.from_ms(lmap.names, lmap.index, ms)
    np.save(path, table.matrix, allow_pickle=False)


def _pairs_above(rtts: RttTable, threshold: float) -> tuple[int, tuple[int, int]]:
    """How many pairs have an RTT above `threshold`, and the first of them in map order ((0, 0) when none)."""
    n = rtts.n
    if isinstance(rtts, GeoRtts):
        farthest = rtts.base_ms + 2.0 * math.pi * 6371.0 * rtts.stretch / FIBRE_KM_PER_MS
        given = sorted(p for p, v in rtts.given.items() if v > threshold)
        if farthest <= threshold:
            return len(given), (given[0] if given else (0, 0))
    count, first = 0, None
    step = max(1, 1_000_000 // max(n, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = np.stack([rtts.row(i) for i in range(lo, hi)])
        mask = (block > threshold) & (np.arange(n)[None, :] > np.arange(lo, hi)[:, None])
        hits = np.argwhere(mask)
        count += len(hits)
        if first is None and len(hits):
            first = (lo + int(hits[0][0]), int(hits[0][1]))
    return count, (first or (0, 0))


def _pairs_below(rtts: RttTable, threshold: float) -> list[tuple[int, int]]:
    """The pairs (i < j, map order) whose RTT is below `threshold` (few for a sane jitter)."""
    n = rtts.n
    out: list[tuple[int, int]] = []
    if isinstance(rtts, GeoRtts):
        from scipy.spatial import cKDTree

        km = rtts.km_for_rtt(threshold)
        if km > 0:
            tree = rtts.tree()
            assert isinstance(tree, cKDTree)
            radius = chord_for_km(km) * (1 + 1e-9) + 1e-12
            for i, j in tree.query_pairs(radius, output_type="ndarray"):
                a, b = (int(i), int(j)) if i < j else (int(j), int(i))
                if (a, b) not in rtts.given and rtts.value(a, b) < threshold:
                    out.append((a, b))
        out += [p for p, v in rtts.given.items() if v < threshold]
        return sorted(set(out))
    step = max(1, 1_000_000 // max(n, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = np.stack([rtts.row(i) for i in range(lo, hi)])
        for r, c in np.argwhere(block < threshold):
            if c > lo + r:
                out.append((lo + int(r), int(c)))
    return out


def _check_all_jitter(
    rtts: RttTable,
    defaults: Mapping[str, float | None],
    links: Mapping[Pair, Mapping[str, float | None]],
    nodes: Mapping[str, Node],
    source: str,
) -> None:
    """Every pair's jitter at most half its RTT: all pairs when a default jitter is set, else the overrides."""
    default = defaults.get("jitter_ms") or 0.0
    if default > 0:
        names = rtts.names
        # default > rtt / 2 + eps  <=>  rtt < 2 (default - eps), up to rounding: candidates, then the exact test
        for i, j in _pairs_below(rtts, 2 * default + 1e-6):
            pair = frozenset((names[i], names[j]))
            rtt = rtts.value(i, j)
            if "jitter_ms" not in links.get(pair, {}) and default > rtt / 2 + _EPS:
                a, b = _ordered(pair, nodes)
                raise UserError(
                    f"{source}: pair ({a}, {b}): link_defaults.jitter_ms {default:g} exceeds half its RTT "
                    f"({rtt:g} ms): each direction's delay is rtt/2 ± jitter and cannot be negative "
                    f"(set a smaller jitter_ms for this pair in links:)"
                )
    for pair, values in links.items():
        _check_jitter(values.get("jitter_ms") or 0.0, rtts[pair], pair, nodes, f"{source}: links")


TRIANGLE_CHECK_MAX_NODES = 300
TRIANGLE_SAMPLE_PAIRS = 5000  # above this many measured pairs, a seeded sample of them is checked


def triangle_violations(lmap: LatencyMap, slack_ms: float = 1.0) -> list[str]:
    """Pairs whose direct RTT exceeds a detour through a third node by more than `slack_ms`.

    Up to TRIANGLE_CHECK_MAX_NODES nodes every pair is checked. Above, the measured pairs (listed or in an
    `rtt_matrix:`) are, vectorised in blocks, TRIANGLE_SAMPLE_PAIRS of them drawn with a fixed seed when there are
    more (a note says so): a derived pair follows the fibre model, in which a detour is never shorter (great-circle
    distance is a metric and the base delay is paid once per path), so it has nothing to report.
    """
    names = lmap.names
    n = len(names)
    if n <= TRIANGLE_CHECK_MAX_NODES:
        return _triangle_all(lmap, slack_ms)
    total, pairs = lmap.rtts.measured_sample(TRIANGLE_SAMPLE_PAIRS)
    notes: list[str] = []
    if total > len(pairs):
        notes.append(f"{lmap.source}: triangle inequality checked on a seeded sample of {len(pairs)} of the "
                     f"{total} measured pairs ({n} nodes)")
    out = []
    batch = max(1, 2_000_000 // n)
    for lo in range(0, len(pairs), batch):
        chunk = pairs[lo : lo + batch]
        ii = np.array([p[0] for p in chunk])
        jj = np.array([p[1] for p in chunk])
        di = np.stack([lmap.row(int(i)) for i in ii])
        dj = np.stack([lmap.row(int(j)) for j in jj])
        detour = di + dj
        k = np.arange(len(chunk))
        detour[k, ii] = np.inf
        detour[k, jj] = np.inf
        best_c = detour.argmin(axis=1)
        best = detour[k, best_c]
        direct = di[k, jj]
        for x in np.flatnonzero(direct > best + slack_ms):
            i, j, c = int(ii[x]), int(jj[x]), names[int(best_c[x])]
            out.append(f"{lmap.source}: pair ({names[i]}, {names[j]}) = {direct[x]:g} ms exceeds the path via {c} "
                       f"({best[x]:g} ms): triangle inequality violated")
    return out + notes


def _triangle_all(lmap: LatencyMap, slack_ms: float) -> list[str]:
    """Every pair of a small map against every detour (cubic; the check as it always was)."""
    names = lmap.names
    d = lmap.array()
    out = []
    for i in range(len(names)):
        detour = d[i][:, None] + d  # detour[c, j] = d[i, c] + d[c, j]
        detour[i, :] = np.inf
        np.fill_diagonal(detour, np.inf)  # c must differ from both ends
        best_c = detour.argmin(axis=0)
        best = detour.min(axis=0)
        for j in range(i + 1, len(names)):
            if d[i, j] > best[j] + slack_ms:
                c = names[int(best_c[j])]
                out.append(
                    f"{lmap.source}: pair ({names[i]}, {names[j]}) = {d[i, j]:g} ms exceeds the path via {c} "
                    f"({best[j]:g} ms): triangle inequality violated"
                )
    return out


def load_latency_map(path: str | Path) -> LatencyMap:
    """Read and validate a latency map file; every problem is a `UserError` naming file and pair."""
    return latency_map_from_dict(read_yaml(path, "latency map"), str(path), base_dir=Path(path).parent)


def read_events(path: str | Path) -> list[Any]:
    """An events file (`--events FILE`, docs/events.md): a list of entries, or a mapping whose only key is
    `events:` holding that list. Its entries are checked against a map by `LatencyMap.with_events`."""
    data = read_yaml(path, "events")
    if isinstance(data, Mapping):
        unknown = [str(k) for k in data if k != "events"]
        if unknown:
            raise UserError(f"{path}: unknown key {unknown[0]!r} (an events file is a list, or a mapping with "
                            "'events:')")
        data = data.get("events")
    if not isinstance(data, list):
        raise UserError(f"{path}: an events file must be a list of entries {{t_s, event, ...}} (or 'events:' "
                        f"holding one), got {brief(data)}")
    return data


def event_entries(raw: Any, lmap: LatencyMap, source: str, key: str = "events") -> list[dict[str, Any]]:
    """The entries of an events file (`read_events`) or an `events:` list checked against `lmap`'s nodes, in
    their YAML form with every time and duration in seconds (`LinkChange.to_dict`, `FogEvent.to_dict`), in time
    order (at equal times, the link changes first): what a record keeps of the events a run was given, and what
    a simulated twin re-times onto its own clock (`gesscale.twin.twin_events`)."""
    changes, events = _parse_changes(raw, lmap.nodes, source, key)
    entries = [*((c.t_s, 0, c.to_dict()) for c in changes), *((e.t_s, 1, e.to_dict()) for e in events)]
    return [d for _, _, d in sorted(entries, key=lambda x: (x[0], x[1]))]
