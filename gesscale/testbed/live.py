"""The live controller's terminal view (the Prometheus endpoint is `gesscale.exporter`, shared with Kubernetes).

Fed by the live runner's listeners (`gesscale.runner`), so it shows exactly what the controller saw and did:
input rate, throughput, backlog, replicas and their nodes, ND_max, the model's parameters, and the
reconfigurations with their measured pauses.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.table import Table

from gesscale.mape import StepRecord


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
