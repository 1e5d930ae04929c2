"""The Prometheus metrics of a live controller run, one set of `gesscale_*` names for every environment.

`gesscale run --backend local`, `gesscale demo` and `gesscale k8s run` (in a pod or on a laptop) export the same
metrics, fed by the live runner's listeners (`gesscale.runner`), so they show exactly what the controller saw
and did: input rate, throughput, backlog, back pressure, CPU, the replicas in use and their nodes, ND_max, what
the policy recommended (also when, in recommend-only mode, nothing is applied), the model's parameters and the
reconfigurations with their measured pauses. Every name, type and label: docs/controller.md, "The live runner
and its Prometheus metrics".
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from gesscale.errors import UserError
from gesscale.mape import StepRecord


class ControllerMetrics:
    """`gesscale_*` gauges and counters of one controller run, optionally served over HTTP."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry(auto_describe=True)
        self.input_rate = Gauge("gesscale_input_rate", "Records/s arriving in the input topic (last period)",
                                registry=r)
        self.throughput = Gauge("gesscale_throughput", "Records/s processed by the job (last period)", registry=r)
        self.backlog = Gauge("gesscale_backlog", "Records in the input topic not yet processed", registry=r)
        self.replicas = Gauge("gesscale_replicas", "Executors (replicas) in use after the last period", registry=r)
        self.node = Gauge("gesscale_replica_node", "1 for each node hosting a replica", ["node"], registry=r)
        self.nd_max = Gauge("gesscale_nd_max_ms", "ND_max of the replicas' nodes (ms)", registry=r)
        self.recommended = Gauge("gesscale_recommended_replicas", "Executors the policy wants after the last period",
                                 registry=r)
        self.recommended_node = Gauge("gesscale_recommended_node", "1 for each node of the recommended placement",
                                      ["node"], registry=r)
        self.recommended_nd_max = Gauge("gesscale_recommended_nd_max_ms", "ND_max of the recommended placement (ms)",
                                        registry=r)
        self.bp = Gauge("gesscale_bp_upstream", "Back pressure at the source, BP_{i-1} (share of held-back batches)",
                        registry=r)
        self.cpu = Gauge("gesscale_cpu_utilisation", "CPU used by the replicas / their cgroup budgets", registry=r)
        self.model = Gauge("gesscale_model_param", "Fitted performance-model parameter", ["param"], registry=r)
        self.measurements = Gauge("gesscale_model_measurements", "MST measurements in the model", registry=r)
        self.decisions = Counter("gesscale_decisions", "Decisions by kind (up, down, move, none) and whether they were "
                                 "applied", ["kind", "applied"], registry=r)
        self.reconfigs = Counter("gesscale_reconfigurations", "Reconfigurations applied", ["kind"], registry=r)
        self.pause = Gauge("gesscale_last_pause_seconds", "Measured pause of the last reconfiguration (s)",
                           registry=r)
        self.steps = Counter("gesscale_control_periods", "Control periods completed", registry=r)
        self._server: Any = None

    def on_step(self, record: StepRecord, model: dict[str, Any] | None = None) -> None:
        """Fold one period (and the policy's model summary, if it has a model) into the metrics."""
        obs, rec = record.observation, record.reconfiguration
        self.input_rate.set(obs.input_rate)
        self.throughput.set(obs.throughput)
        self.backlog.set(obs.backlog)
        self.bp.set(obs.bp_upstream)
        if obs.cpu is not None:
            self.cpu.set(obs.cpu)
        done = rec if record.applied else None
        running = (rec.nodes, rec.nd_max_ms) if rec is not None else (obs.replicas, obs.nd_max_ms)
        observed = (obs.replicas, obs.nd_max_ms)
        # in recommend-only mode the replicas stay as observed; the recommendation is exported apart
        _show(running if done is not None else observed, self.replicas, self.nd_max, self.node)
        _show(running, self.recommended, self.recommended_nd_max, self.recommended_node)
        for key in ("alpha", "beta", "gamma", "delta"):
            if model and model.get(key) is not None:
                self.model.labels(param=key).set(float(model[key]))
        if model and model.get("measurements") is not None:
            self.measurements.set(model["measurements"])
        self.decisions.labels(kind=rec.kind if rec is not None else "none", applied=str(record.applied).lower()).inc()
        if done is not None:
            self.reconfigs.labels(kind=done.kind).inc()
            self.pause.set(done.pause_s)
        self.steps.inc()

    def text(self) -> str:
        """The Prometheus text exposition."""
        return generate_latest(self.registry).decode()

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve `/metrics` on host:port in a background thread; UserError when the port is taken."""
        from prometheus_client import start_http_server

        try:
            self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            raise UserError(f"cannot serve metrics on {host}:{port}: {err.strerror or err}") from None

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _show(placement: tuple[tuple[str, ...], float], count: Gauge, nd_max: Gauge, per_node: Gauge) -> None:
    """Export one placement (its nodes and ND_max) as a replica count, an ND_max and one series per node."""
    nodes, nd = placement
    count.set(len(nodes))
    nd_max.set(nd)
    per_node.clear()
    for n in nodes:
        per_node.labels(node=n).set(1)
