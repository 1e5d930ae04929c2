"""Reading Kubernetes node objects (pure: raw JSON dicts in, plain values out).

A node may be chosen when it is Ready, not cordoned (`spec.unschedulable`) and carries no NoSchedule or
NoExecute taint — executor pods tolerate none, so a tainted node would leave the new executor Pending.
The latency map can come from the inventory file or from node annotations (`gesscale.io/rtt-ms` holding JSON
`{peer: rtt_ms}`, optional `gesscale.io/region`, `gesscale.io/lat`, `gesscale.io/lon`), e.g. written by the
provisioning playbook so the cluster carries its own map.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gesscale.errors import UserError
from gesscale.k8s.names import LAT_ANNOTATION, LON_ANNOTATION, REGION_ANNOTATION, RTT_ANNOTATION
from gesscale.latency_map import LatencyMap, latency_map_from_dict
from gesscale.observation import NodeState

BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class KubeNode:
    """A Kubernetes node as the controller needs it: readiness, cordon and taints, labels and annotations."""

    name: str
    ready: bool
    unschedulable: bool
    blocking_taints: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> NodeState:
        """The backend-neutral view: a tainted node counts as cordoned (nothing new may land there)."""
        return NodeState(self.name, ready=self.ready, cordoned=self.unschedulable or bool(self.blocking_taints))


def parse_node(obj: dict[str, Any]) -> KubeNode:
    """A node's raw JSON object into a `KubeNode`."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = tuple(
        f"{t.get('key')}:{t.get('effect')}"
        for t in spec.get("taints") or []
        if t.get("effect") in BLOCKING_TAINT_EFFECTS
    )
    return KubeNode(
        name=str(meta.get("name")),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        blocking_taints=taints,
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
    )


def latency_map_from_nodes(nodes: Iterable[KubeNode], default_rtt_ms: float | None = None) -> LatencyMap | None:
    """The latency map the nodes carry in their annotations, or None when no node has `gesscale.io/rtt-ms`.

    The map holds the annotated nodes and the peers they name; other nodes (e.g. the k3s server, which runs no
    executor) stay out of it and are never chosen. A pair of the map listed by nobody is an error unless
    `default_rtt_ms` is given, as for a map file.
    """
    nodes = list(nodes)
    annotated = [n for n in nodes if RTT_ANNOTATION in n.annotations]
    if not annotated:
        return None
    named: set[str] = set()
    for n in annotated:
        try:
            row = json.loads(n.annotations[RTT_ANNOTATION])
        except ValueError:
            row = {}
        if isinstance(row, dict):
            named |= {str(peer) for peer in row}
    doc: dict[str, Any] = {"nodes": {}, "rtt_ms": {}}
    for n in nodes:
        if n not in annotated and n.name not in named:
            continue
        entry: dict[str, Any] = {}
        if REGION_ANNOTATION in n.annotations:
            entry["region"] = n.annotations[REGION_ANNOTATION]
        for key, ann in (("lat", LAT_ANNOTATION), ("lon", LON_ANNOTATION)):
            if ann in n.annotations:
                try:
                    entry[key] = float(n.annotations[ann])
                except ValueError:
                    raise UserError(f"node {n.name}: annotation {ann} is not a number") from None
        doc["nodes"][n.name] = entry
        raw = n.annotations.get(RTT_ANNOTATION)
        if raw is None:
            continue
        try:
            row = json.loads(raw)
        except ValueError:
            raise UserError(f"node {n.name}: annotation {RTT_ANNOTATION} is not JSON ({raw[:60]!r})") from None
        if not isinstance(row, dict):
            raise UserError(f"node {n.name}: annotation {RTT_ANNOTATION} must be a JSON object {{peer: rtt_ms}}")
        doc["rtt_ms"][n.name] = {str(peer): ms for peer, ms in row.items()}
    if default_rtt_ms is not None:
        doc["default_rtt_ms"] = default_rtt_ms
    return latency_map_from_dict(doc, "node annotations")
