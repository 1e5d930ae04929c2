"""The site view of a latency map: the model's latency as the farthest replica's RTT to the site.

Live, a micro-batch of a query whose replicas exchange nothing (a map such as `nearest-landmark`) waits for its
slowest task, and a task's time grows with its node's RTT to the site, where the input broker and the job's
driver run (about 28 round trips a task, docs/calibration.md): what a placement costs is the largest RTT from one
of its replicas to the site, not the largest RTT among its replicas (ND_max, the paper's variable).

`SiteView(lmap, site)` gives that variable the shape of ND_max, so the placement functions, the performance
model and the controller take it unchanged: the view's RTT of a pair of nodes is the larger of their two RTTs to
the site, hence ND_max on the view of a placement of two or more replicas is its farthest replica's RTT to the
site (0 for one replica, as ND_max). Greedy latency-aware placement on the view adds the free node nearest to the
site and removes the farthest one (ties broken as on any map: smallest, then largest sum of RTTs).

It implements what placement reads of a large map (`names`, `index`, `row`, `block`, `nd_max`, `rtt`, `memo`),
so it serves maps of any size; a row costs one `numpy.maximum` over the site's row. The diagonal of `row` and
`block` holds each node's own RTT to the site (a lone replica's round trips), where a map has 0: ND_max never
reads it (it takes pairs), the sums placement breaks ties by do, so that the site itself is the first node placed
and, among replicas equally far from the site's farthest, the farthest is removed first. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.model import MODEL_LATENCIES  # the controller's `model_latency`, a model's and a truth's `latency`


class SiteView:
    """A latency map seen from its site: the RTT of a pair is the larger of the two nodes' RTTs to `site`."""

    def __init__(self, lmap: LatencyMap, site: str) -> None:
        if site not in lmap.nodes:
            raise UserError(f"the site {site!r} is not a node of the latency map {lmap.source}")
        self.lmap = lmap
        self.site = site
        self.source = f"{lmap.source} (seen from the site {site})"
        self.to_site = np.array(lmap.row(lmap.index[site]), dtype=np.float64)  # RTT of every node to the site
        self._memo: dict[str, Any] = {"column_sums": _column_sums(self.to_site)}

    @property
    def names(self) -> list[str]:
        """Node names in the map's order."""
        return self.lmap.names

    @property
    def index(self) -> dict[str, int]:
        """Each node's position in `names`."""
        return self.lmap.index

    @property
    def nodes(self) -> Any:
        """The map's nodes."""
        return self.lmap.nodes

    def _idx(self, name: str) -> int:
        try:
            return self.lmap.index[name]
        except KeyError:
            raise UserError(f"{self.lmap.source}: unknown node {name!r}") from None

    def rtt(self, a: str, b: str) -> float:
        """The view's RTT of a pair: the larger of their RTTs to the site (0 for a node with itself)."""
        i, j = self._idx(a), self._idx(b)
        return 0.0 if i == j else float(max(self.to_site[i], self.to_site[j]))

    def row(self, i: int) -> np.ndarray:
        """The view's RTTs from the node at index i to every node, in map order (to itself: its RTT to the site)."""
        return np.maximum(self.to_site, self.to_site[i])

    def block(self, names: Iterable[str]) -> np.ndarray:
        """The k x k matrix of the view's RTTs among some nodes, in the order given (diagonal: as `row`)."""
        r = self.to_site[[self._idx(n) for n in names]]
        return np.maximum.outer(r, r)

    def nd_max(self, names: Iterable[str]) -> float:
        """ND_max on the view: the farthest node's RTT to the site for two or more nodes, 0 for fewer."""
        idx = [self._idx(n) for n in names]
        return float(self.to_site[idx].max()) if len(idx) > 1 else 0.0

    def memo(self) -> dict[str, Any]:
        """A scratch space for values placement computes once per view (column sums, candidate masks)."""
        return self._memo


def _column_sums(to_site: np.ndarray) -> np.ndarray:
    """Every node's sum of view RTTs to all nodes (`row`'s, its own RTT to the site included): the sum over u of
    max(r_v, r_u), from the sorted RTTs (n log n, where reading every row would cost n^2); placement's first node
    from nothing is the one with the smallest (the site: it is strictly smallest unless another node is 0 away)."""
    order = np.sort(to_site)
    suffix = np.concatenate([np.cumsum(order[::-1])[::-1], [0.0]])  # suffix[k] = sum of order[k:]
    at_most = np.searchsorted(order, to_site, side="right")  # how many nodes are no farther than v
    return to_site * at_most + suffix[at_most]


def placement_view(lmap: LatencyMap, latency: str, site: str | None) -> Any:
    """What the controller places on and measures the model's latency with: the map's placement graph (ND_max)
    or its `SiteView` (`latency` "site"; UserError without a site)."""
    if latency not in MODEL_LATENCIES:
        raise UserError(f"model latency must be one of {', '.join(MODEL_LATENCIES)}, got {latency!r}")
    if latency == "nd_max":
        return lmap.placement_graph()
    if not site:
        raise UserError("model_latency site needs a site (the node of the input broker and the job's driver): "
                        "the testbed's WAN site, or a scenario's cluster.site")
    return SiteView(lmap, site)
