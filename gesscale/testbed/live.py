"""The live controller's outputs: a rich terminal view and a Prometheus endpoint with `gesscale_*` metrics.

Both are fed by the MAPE loop's `on_step` callback, so they show exactly what the controller saw and did:
input rate, throughput, backlog, replicas and their nodes, ND_max, the model's parameters, and the
reconfigurations with their measured pauses.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from rich.table import Table

from gesscale.errors import UserError
from gesscale.mape import StepRecord


class ControllerMetrics:
    """`gesscale_*` gauges and counters of one controller run, optionally served over HTTP."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.input_rate = Gauge("gesscale_input_rate", "Records/s arriving in the input topic (last period)",
                                registry=r)
        self.throughput = Gauge("gesscale_throughput", "Records/s processed by the job (last period)", registry=r)
        self.backlog = Gauge("gesscale_backlog", "Records in the input topic not yet processed", registry=r)
        self.replicas = Gauge("gesscale_replicas", "Executors (replicas) in use", registry=r)
        self.node = Gauge("gesscale_replica_node", "1 for each node hosting a replica", ["node"], registry=r)
        self.nd_max = Gauge("gesscale_nd_max_ms", "ND_max of the replicas' nodes (ms)", registry=r)
        self.bp = Gauge("gesscale_bp_upstream", "Back pressure at the source, BP_{i-1} (share of held-back batches)",
                        registry=r)
        self.cpu = Gauge("gesscale_cpu_utilisation", "CPU used by the replicas / their cgroup budgets", registry=r)
        self.model = Gauge("gesscale_model_param", "Fitted performance-model parameter", ["param"], registry=r)
        self.measurements = Gauge("gesscale_model_measurements", "MST measurements in the model", registry=r)
        self.reconfigs = Counter("gesscale_reconfigurations", "Reconfigurations applied", ["kind"], registry=r)
        self.pause = Gauge("gesscale_last_pause_seconds", "Measured pause of the last reconfiguration (s)",
                           registry=r)
        self.steps = Counter("gesscale_control_periods", "Control periods completed", registry=r)
        self._server: Any = None

    def on_step(self, record: StepRecord, model: dict[str, Any] | None) -> None:
        """Fold one period into the metrics."""
        obs = record.observation
        self.input_rate.set(obs.input_rate)
        self.throughput.set(obs.throughput)
        self.backlog.set(obs.backlog)
        self.bp.set(obs.bp_upstream)
        if obs.cpu is not None:
            self.cpu.set(obs.cpu)
        nodes = record.reconfiguration.nodes if record.applied and record.reconfiguration else obs.replicas
        nd = record.reconfiguration.nd_max_ms if record.applied and record.reconfiguration else obs.nd_max_ms
        self.replicas.set(len(nodes))
        self.nd_max.set(nd)
        self.node.clear()
        for n in nodes:
            self.node.labels(node=n).set(1)
        for key in ("alpha", "beta", "gamma"):
            if model and model.get(key) is not None:
                self.model.labels(param=key).set(float(model[key]))
        if model and model.get("measurements") is not None:
            self.measurements.set(model["measurements"])
        if record.applied and record.reconfiguration is not None:
            self.reconfigs.labels(kind=record.reconfiguration.kind).inc()
            self.pause.set(record.reconfiguration.pause_s)
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


class LiveView:
    """A rich renderable of the run: the last periods and the reconfigurations so far."""

    def __init__(self, title: str, rows: int = 12) -> None:
        self.title = title
        self.rows = rows
        self.records: list[StepRecord] = []
        self.model: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def on_step(self, record: StepRecord, model: dict[str, Any] | None) -> None:
        """Remember one period."""
        with self._lock:
            self.records.append(record)
            self.model = model

    def __rich__(self) -> Table:
        with self._lock:
            records = list(self.records[-self.rows:])
            model = self.model
        caption = "model: not fitted yet"
        if model and model.get("alpha") is not None:
            caption = (f"model MST = {model['alpha']:.1f}·n^{model['beta']:.2f} − {model['gamma']:.2f}·ND_max "
                       f"({model.get('measurements', 0)} measurements)")
        elif model is None:
            caption = "policy without a performance model"
        table = Table(title=self.title, caption=caption, expand=False)
        for col in ("t (s)", "input/s", "done/s", "backlog", "BP", "CPU", "replicas", "ND_max", "decision"):
            table.add_column(col, justify="right" if col not in ("replicas", "decision") else "left")
        for r in records:
            o = r.observation
            rec = r.reconfiguration
            if r.applied and rec is not None:
                decision = f"[bold]{rec.kind} {'+' + ','.join(rec.added) if rec.added else ''}" \
                           f"{'-' + ','.join(rec.removed) if rec.removed else ''}[/bold] pause {rec.pause_s:.1f}s"
            else:
                decision = r.decision.reason
            table.add_row(f"{o.time_s:.0f}", f"{o.input_rate:.0f}", f"{o.throughput:.0f}", f"{o.backlog:.0f}",
                          f"{o.bp_upstream:.2f}", "-" if o.cpu is None else f"{o.cpu:.0%}", ",".join(o.replicas),
                          f"{o.nd_max_ms:.0f}", decision[:60])
        return table
