"""Exports of the job's batch records: Prometheus text for scraping, and JSON lines appended to a file."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from gesscale.batch_record import BatchRecord

GAUGES = (
    ("batch_id", "Id of the last completed micro-batch"),
    ("num_input_rows", "Records read by the last micro-batch"),
    ("input_rate", "Records/s arriving, as Spark measured over the last trigger"),
    ("processed_rate", "Records/s processed by the last micro-batch"),
    ("batch_duration_ms", "Wall time of the last micro-batch in ms"),
    ("backlog", "Records in the input topic not yet processed (sum latest - sum end offsets)"),
    ("bp_upstream", "Fraction of recent micro-batches the source held data back in (BP_{i-1}, docs/controller.md)"),
    ("bp_operator", "Back pressure from the operator's downstream (BP_i; 0 for a Kafka sink)"),
)
PREFIX = "gesscale_job_"


class ObservationCollector:
    """Prometheus collector reading the latest batch record on each scrape (so gone executors disappear)."""

    def __init__(self, latest: Callable[[], BatchRecord | None]) -> None:
        self._latest = latest

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One gauge per observation number, plus `gesscale_job_executor{id,host} 1` per executor."""
        obs = self._latest()
        if obs is None:
            return
        for key, doc in GAUGES:
            yield GaugeMetricFamily(PREFIX + key, doc, value=float(getattr(obs, key)))
        held = GaugeMetricFamily(PREFIX + "held_back", "1 if the last micro-batch left data behind",
                                 value=1.0 if obs.held_back else 0.0)
        yield held
        yield GaugeMetricFamily(PREFIX + "executors", "Active executors", value=len(obs.executors))
        ex = GaugeMetricFamily(PREFIX + "executor", "An active executor and its host", labels=["id", "host"])
        for e in obs.executors:
            ex.add_metric([e.id, e.host], 1.0)
        yield ex


def prometheus_text(latest: Callable[[], BatchRecord | None]) -> Callable[[], bytes]:
    """A function rendering the latest batch record in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ObservationCollector(latest))
    return lambda: generate_latest(registry)


class JsonLines:
    """Appends one JSON object per line to a file, flushed at once so a monitor can tail it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        """Append `record` as one line."""
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
