"""LocalBackend.observe on a recorded batch log, without Spark: how a period is delimited."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from gesscale.latency_map import latency_map_from_dict
from gesscale.testbed.backend import LocalBackend


class _Fleet:
    """The part of a Fleet the backend reads: one node, no CPU budget used."""

    def __init__(self) -> None:
        self.names = ["fog1"]
        self.state = SimpleNamespace(t0=time.time(), nodes={"fog1": SimpleNamespace(cores=0.25, host="127.0.0.31")})

    def host_of(self, name: str) -> str:
        return "127.0.0.31"

    def cpu_seconds(self, name: str) -> float:
        return 0.0


class _Job:
    """A job whose batches are lines of a JSON-lines file and whose hook lists one executor."""

    def __init__(self, batches: Path) -> None:
        self.batches_path = batches
        self.settings = SimpleNamespace(input="rides", bootstrap="unused")
        self.hook = SimpleNamespace(executors=lambda: {"executors": [{"id": "0", "host": "127.0.0.31"}]})


def _backend(tmp_path: Path, input_end: list[int], period_s: float) -> tuple[LocalBackend, Path]:
    batches = tmp_path / "batches.jsonl"
    batches.write_text("")
    lmap = latency_map_from_dict({"nodes": {"fog1": {}}, "rtt_ms": {}})
    backend = LocalBackend(_Fleet(), _Job(batches), lmap, control_period_s=period_s,  # type: ignore[arg-type]
                           input_end=lambda: input_end[0])
    return backend, batches


def _append(path: Path, batch_id: int, rows: int, duration_ms: int = 100) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps({"batch_id": batch_id, "num_input_rows": rows, "batch_duration_ms": duration_ms,
                             "time": time.time(), "held_back": False}) + "\n")


def test_an_idle_input_ends_the_period_at_its_nominal_end(tmp_path: Path) -> None:
    # Everything that arrived was processed: no batch will come to close the period, so waiting two more
    # periods for one (as for a busy job) only delays the controller.
    input_end = [0]
    backend, batches = _backend(tmp_path, input_end, period_s=1.0)
    input_end[0] = 500
    _append(batches, 0, 500)
    t = time.monotonic()
    obs = backend.observe()
    took = time.monotonic() - t
    assert 0.9 <= took < 2.0, took
    assert obs.throughput > 0 and obs.backlog == 0


def test_records_waiting_stretch_the_period_to_the_next_batch(tmp_path: Path) -> None:
    input_end = [0]
    backend, batches = _backend(tmp_path, input_end, period_s=1.0)
    input_end[0] = 1000  # 1000 arrived, none processed yet: a batch is running
    t = time.monotonic()

    threading.Timer(1.8, lambda: _append(batches, 0, 1000, duration_ms=1700)).start()
    obs = backend.observe()
    took = time.monotonic() - t
    assert took >= 1.7, took
    assert obs.extra["batches"] == 1 and obs.backlog == 0
