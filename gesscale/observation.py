"""What the controller sees each control period and what it decides.

Backends (simulator, local Spark testbed, Kubernetes) produce `Observation`s; policies turn them into
`Decision`s; the MAPE loop realises decisions as `Placement`s through the backend. These plain dataclasses are
the contract between the pieces, so none of them depends on another's internals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class NodeState:
    """A node that can host a replica: its name and whether it may be chosen now."""

    name: str
    ready: bool = True
    cordoned: bool = False

    @property
    def schedulable(self) -> bool:
        """A node is chosen only when it is up and not cordoned."""
        return self.ready and not self.cordoned


@dataclass(frozen=True)
class Observation:
    """One control period of the operator, as measured by a backend.

    Rates are records/s averaged over the period. `bp_upstream` (BP_{i-1}) is the fraction of the period in
    which the source held data back because the operator did not take it (Spark: micro-batches that started
    with more data available than they consumed); `bp_operator` (BP_i) is the operator's own back pressure
    from its downstream (0 for a job that writes to Kafka). `cpu` is the mean utilisation of the replicas in
    [0, 1] when the backend can tell, else None. `busy` is the fraction of the period spent processing
    (Flink's busy time; None when unknown). `paused_s` is processing time lost to a reconfiguration. `lost` names
    the replicas that went away during the period without the controller asking (a crashed or departed node, an
    executor declared lost); `replicas` no longer holds them, and the control loop replaces them.
    """

    time_s: float
    period_s: float
    input_rate: float
    throughput: float
    backlog: float
    backlog_growth: float
    bp_upstream: float
    bp_operator: float
    replicas: tuple[str, ...]
    nd_max_ms: float
    cpu: float | None = None
    busy: float | None = None
    paused_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    lost: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """Number of replicas in use."""
        return len(self.replicas)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = asdict(self)
        d["replicas"] = list(self.replicas)
        if self.lost:
            d["lost"] = list(self.lost)
        else:
            del d["lost"]  # the form of a period without losses is unchanged
        return d


@dataclass(frozen=True)
class Decision:
    """A policy's answer for one period: the replica count wanted, and optionally which nodes.

    `add` / `remove` name nodes when the policy chose them itself (latency-aware or random placement);
    otherwise the loop fills them in with the configured placement. `reason` is a human-readable note that ends
    up in the log and reports.
    """

    target: int
    reason: str = ""
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placement:
    """The set of nodes hosting replicas after a reconfiguration."""

    nodes: tuple[str, ...]
    nd_max_ms: float

    def changes_from(self, before: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """(nodes to add, nodes to remove) to go from `before` to this placement, in placement order."""
        return [n for n in self.nodes if n not in before], [n for n in before if n not in self.nodes]


@dataclass(frozen=True)
class Reconfiguration:
    """A realised change: when, which nodes came and went, the ND_max after it, and the pause it caused.

    The one record of a reconfiguration. The MAPE loop makes it from its decision (`time_s` of the observation,
    `reason`); a live backend that measures its changes (the local testbed) also fills in the timing it measured:
    `strategy`, `started_s` (when the change began), `took_s` (how long it took), `effective_s` (when a batch of
    the new configuration completed), all in the backend's seconds. `with_measurement` joins the two; unset
    timing is left out of the JSON form, so a simulated change keeps its keys.
    """

    time_s: float
    kind: str  # "up" | "down" | "move" (a replica re-placed: added first, then the old one removed)
    added: tuple[str, ...]
    removed: tuple[str, ...]
    nodes: tuple[str, ...]
    nd_max_ms: float
    pause_s: float
    reason: str = ""
    strategy: str | None = None
    started_s: float | None = None
    took_s: float | None = None
    effective_s: float | None = None

    def with_measurement(self, measured: Reconfiguration | None, strategy: str | None = None) -> Reconfiguration:
        """This decision's record with the timing a backend `measured` (its own record of the same change) and
        the backend's `strategy` (default: the measured record's)."""
        timing = {k: getattr(measured, k) for k in MEASURED} if measured is not None else {}
        return replace(self, **timing, strategy=strategy if strategy is not None else
                       (measured.strategy if measured is not None else self.strategy))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the demo report's `reconfigurations` entries carry kind, nodes, nd_max_ms, pause_s; the live
        controller's `reconfigurations.jsonl` lines also strategy and the measured timing, rounded to ms)."""
        d = asdict(self)
        for k in ("added", "removed", "nodes"):
            d[k] = list(d[k])
        for k in ("strategy", *MEASURED):
            if d[k] is None:
                del d[k]
            elif k in MEASURED:
                d[k] = round(d[k], 3)
        return d


MEASURED = ("started_s", "took_s", "effective_s")  # the timing a live backend measures (Reconfiguration)
