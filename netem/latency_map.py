"""Latency maps: which nodes exist and the round-trip time between each pair.

One map feeds both the WAN emulation (`tc` on each node) and the controller's placement graph, so the
latencies the controller reasons about are the ones the cluster is given.

File format (YAML), see shared/DESIGN.md §5::

    nodes:
      pi01: {region: umea, lat: 63.83, lon: 20.26}
      pi02: {region: stockholm, lat: 59.33, lon: 18.07}
    rtt_ms:
      pi01: {pi02: 12.5}
    default_rtt_ms: 50      # optional: used for pairs not listed
    derive: geo             # optional: derive pairs not listed from coordinates
    geo: {stretch: 1.5, base_ms: 1.0}
    symmetry_tolerance_ms: 1.0

A pair may be listed in one direction only. Listed in both directions, the two values must agree within the
tolerance (their mean is used). Problems are reported as `UserError` naming the offending pair; triangle-
inequality violations are kept as warnings (real WANs have them, e.g. with policy routing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from gesscale.errors import UserError
from gesscale.yamlfile import read_yaml

# Speed of light in optical fibre: c / n with n ≈ 1.47 → ≈ 204 km per ms; 200 km/ms is the usual rule of thumb.
FIBRE_KM_PER_MS = 200.0
EARTH_RADIUS_KM = 6371.0
DEFAULT_STRETCH = 1.5  # fibre routes are longer than the great circle (route inflation); 1.5 is conservative
DEFAULT_BASE_MS = 1.0  # switching, last mile and host stack, added once per round trip


@dataclass(frozen=True)
class Node:
    """A node of the map: its name and where it is (region label and optional coordinates)."""

    name: str
    region: str | None = None
    lat: float | None = None
    lon: float | None = None


def great_circle_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Haversine distance in km between two points given in degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


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


@dataclass
class LatencyMap:
    """Nodes and the symmetric RTT (ms) of every pair; the input of placement and of `tc` plans."""

    nodes: dict[str, Node]
    rtts: dict[frozenset[str], float]
    source: str = "<inline>"
    warnings: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """Node names in the order the map lists them."""
        return list(self.nodes)

    def rtt(self, a: str, b: str) -> float:
        """RTT in ms between two nodes of the map (0 for a node with itself)."""
        if a == b:
            if a not in self.nodes:
                raise UserError(f"{self.source}: unknown node {a!r}")
            return 0.0
        try:
            return self.rtts[frozenset((a, b))]
        except KeyError:
            unknown = [x for x in (a, b) if x not in self.nodes]
            if unknown:
                raise UserError(f"{self.source}: unknown node {unknown[0]!r}") from None
            raise UserError(f"{self.source}: no RTT for pair ({a}, {b})") from None

    def nd_max(self, names: Iterable[str]) -> float:
        """ND_max of a set of nodes: the largest RTT among its pairs (0 for fewer than two nodes)."""
        chosen = list(names)
        worst = 0.0
        for i, a in enumerate(chosen):
            for b in chosen[i + 1 :]:
                worst = max(worst, self.rtt(a, b))
        return worst

    def graph(self) -> nx.Graph:
        """The complete weighted graph of the map: node attributes region/lat/lon, edge weight = RTT ms."""
        g = nx.Graph()
        for node in self.nodes.values():
            g.add_node(node.name, region=node.region, lat=node.lat, lon=node.lon)
        for pair, rtt in self.rtts.items():
            a, b = sorted(pair)
            g.add_edge(a, b, weight=rtt)
        return g

    def matrix(self) -> list[list[float]]:
        """RTT matrix in the order of `names`."""
        return [[self.rtt(a, b) for b in self.names] for a in self.names]

    def subset(self, names: Iterable[str]) -> LatencyMap:
        """The map restricted to some of its nodes."""
        keep = list(names)
        for n in keep:
            if n not in self.nodes:
                raise UserError(f"{self.source}: unknown node {n!r}")
        rtts = {p: v for p, v in self.rtts.items() if p <= set(keep)}
        return LatencyMap({n: self.nodes[n] for n in keep}, rtts, self.source, list(self.warnings))

    def to_dict(self) -> dict[str, Any]:
        """The map in its YAML form, every pair explicit (one direction)."""
        nodes: dict[str, Any] = {}
        for node in self.nodes.values():
            nodes[node.name] = {
                k: v for k, v in (("region", node.region), ("lat", node.lat), ("lon", node.lon)) if v is not None
            }
        rtt: dict[str, dict[str, float]] = {}
        names = self.names
        for i, a in enumerate(names):
            row = {b: round(self.rtt(a, b), 3) for b in names[i + 1 :]}
            if row:
                rtt[a] = row
        return {"nodes": nodes, "rtt_ms": rtt}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: RTT must be a number, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise UserError(f"{where}: RTT must be finite, got {value!r}")
    if value < 0:
        raise UserError(f"{where}: RTT must not be negative, got {value}")
    return float(value)


def _parse_nodes(raw: Any, source: str) -> dict[str, Node]:
    if raw is None:
        raise UserError(f"{source}: missing 'nodes'")
    if isinstance(raw, list):
        raw = {str(n): {} for n in raw}
    if not isinstance(raw, Mapping) or not raw:
        raise UserError(f"{source}: 'nodes' must be a non-empty mapping of node name to attributes")
    nodes: dict[str, Node] = {}
    for name, attrs in raw.items():
        attrs = attrs or {}
        if not isinstance(attrs, Mapping):
            raise UserError(f"{source}: node {name!r}: attributes must be a mapping (region, lat, lon)")
        lat, lon = attrs.get("lat"), attrs.get("lon")
        for key, val in (("lat", lat), ("lon", lon)):
            if val is not None and (isinstance(val, bool) or not isinstance(val, int | float)):
                raise UserError(f"{source}: node {name!r}: {key} must be a number, got {val!r}")
        if lat is not None and not -90 <= lat <= 90:
            raise UserError(f"{source}: node {name!r}: lat {lat} outside [-90, 90]")
        if lon is not None and not -180 <= lon <= 180:
            raise UserError(f"{source}: node {name!r}: lon {lon} outside [-180, 180]")
        region = attrs.get("region")
        nodes[str(name)] = Node(
            str(name),
            None if region is None else str(region),
            None if lat is None else float(lat),
            None if lon is None else float(lon),
        )
    return nodes


def latency_map_from_dict(data: Any, source: str = "<inline>") -> LatencyMap:
    """Build and validate a latency map from its parsed YAML form (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise UserError(f"{source}: a latency map must be a mapping with 'nodes' and 'rtt_ms'")
    nodes = _parse_nodes(data.get("nodes"), source)
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
    stretch = _number(geo.get("stretch", DEFAULT_STRETCH), f"{source}: geo.stretch")
    base_ms = _number(geo.get("base_ms", DEFAULT_BASE_MS), f"{source}: geo.base_ms")

    raw = data.get("rtt_ms") or {}
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

    rtts: dict[frozenset[str], float] = {}
    names = list(nodes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ab, ba = given.get((a, b)), given.get((b, a))
            if ab is not None and ba is not None:
                if abs(ab - ba) > tolerance:
                    raise UserError(
                        f"{source}: pair ({a}, {b}) is asymmetric: {ab} ms vs {ba} ms "
                        f"(tolerance {tolerance} ms)"
                    )
                value = (ab + ba) / 2
            elif ab is not None or ba is not None:
                value = ab if ab is not None else ba  # type: ignore[assignment]
            elif derive == "geo":
                value = round(geo_rtt_ms(nodes[a], nodes[b], stretch, base_ms), 3)
            elif default is not None:
                value = default
            else:
                raise UserError(
                    f"{source}: missing RTT for pair ({a}, {b}) (list it, or set default_rtt_ms or derive: geo)"
                )
            rtts[frozenset((a, b))] = float(value)

    result = LatencyMap(nodes, rtts, source)
    result.warnings.extend(triangle_violations(result))
    return result


TRIANGLE_CHECK_MAX_NODES = 300


def triangle_violations(lmap: LatencyMap, slack_ms: float = 1.0) -> list[str]:
    """Pairs whose direct RTT exceeds a detour through a third node by more than `slack_ms`.

    The check is cubic in the number of nodes; above TRIANGLE_CHECK_MAX_NODES it is skipped with a note.
    """
    import numpy as np

    names = lmap.names
    if len(names) > TRIANGLE_CHECK_MAX_NODES:
        return [f"{lmap.source}: triangle inequality not checked ({len(names)} nodes)"]
    d = np.asarray(lmap.matrix(), dtype=float)
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
    return latency_map_from_dict(read_yaml(path, "latency map"), str(path))
