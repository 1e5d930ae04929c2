"""Prometheus metrics of the controller's decisions, so a dry run (`--recommend-only`) can be watched.

Cautious operators first run an autoscaler that only recommends (the Flink operator's autoscaler offers the
same): each period's decision is logged and exported here, applied or not, next to what the cluster runs.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from gesscale.mape import StepRecord


class DecisionExporter:
    """Gauges and counters updated from each `StepRecord` of the MAPE loop (`on_step`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.replicas = Gauge("gesscale_controller_replicas", "Executors running at the last observation", registry=r)
        self.recommended = Gauge(
            "gesscale_controller_recommended_replicas", "Executors the policy wants after the last period", registry=r
        )
        self.nd_max = Gauge("gesscale_controller_nd_max_ms", "ND_max of the running executors (ms)", registry=r)
        self.recommended_nd_max = Gauge(
            "gesscale_controller_recommended_nd_max_ms", "ND_max of the recommended placement (ms)", registry=r
        )
        self.input_rate = Gauge("gesscale_controller_input_rate", "Records/s arriving (last period)", registry=r)
        self.throughput = Gauge("gesscale_controller_throughput", "Records/s processed (last period)", registry=r)
        self.node = Gauge(
            "gesscale_controller_recommended_node", "1 for each node of the recommended placement", ["node"],
            registry=r,
        )
        self.decisions = Counter(
            "gesscale_controller_decisions", "Decisions by kind (up, down, none) and whether they were applied",
            ["kind", "applied"], registry=r,
        )

    def on_step(self, record: StepRecord) -> None:
        """Fold one period's observation and decision into the metrics."""
        obs, rec = record.observation, record.reconfiguration
        self.replicas.set(obs.n)
        self.nd_max.set(obs.nd_max_ms)
        self.input_rate.set(obs.input_rate)
        self.throughput.set(obs.throughput)
        nodes = rec.nodes if rec is not None else obs.replicas
        self.recommended.set(len(nodes))
        self.recommended_nd_max.set(rec.nd_max_ms if rec is not None else obs.nd_max_ms)
        self.node.clear()
        for node in nodes:
            self.node.labels(node=node).set(1)
        kind = rec.kind if rec is not None else "none"
        self.decisions.labels(kind=kind, applied=str(record.applied).lower()).inc()

    def text(self) -> str:
        """The metrics in the Prometheus text format."""
        return generate_latest(self.registry).decode()
