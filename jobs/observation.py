"""Turns Spark's streaming progress into the job's per-batch record (pure: no Spark, no I/O).

The record is `gesscale.batch_record.BatchRecord`; its `to_dict()` is what the job writes and serves.

Back pressure (docs/controller.md): Spark has no back-pressure gauge, so the source side is measured by admission
control. A micro-batch is *held back* when, as it was planned, the broker held more records than the batch took
(some partition's latest offset > the batch's end offset, i.e. `maxRowsPerBatch` bound it). `bp_upstream` is the
fraction of the micro-batches that finished in the last `window_s` seconds that were held back. `bp_operator`
is 0: the job writes to Kafka (or files), whose producer never pushes back on the operator.
"""

from __future__ import annotations

import json
from collections import deque
from datetime import datetime
from typing import Any

from gesscale.batch_record import KEYS as OBSERVATION_KEYS
from gesscale.batch_record import BatchRecord, Executor
from jobs.offsets import held_back, normalise, total

__all__ = ["OBSERVATION_KEYS", "ObservationTracker"]


def _offsets(value: Any) -> dict[str, int]:
    """Progress offsets arrive as dicts or JSON strings, or null before the first batch."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return normalise(value)


def _unix(ts: str) -> float:
    """Spark progress timestamps look like `2026-11-22T06:40:01.123Z`."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class ObservationTracker:
    """Keeps the recent batches and builds one `BatchRecord` per progress event.

    `executors` are dicts `{"id": str, "host": str}` as reported by the executor control.
    """

    def __init__(self, window_s: float = 60.0) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be > 0")
        self.window_s = window_s
        self._recent: deque[tuple[float, bool]] = deque()
        self.latest: BatchRecord | None = None

    def update(self, progress: dict[str, Any], executors: list[dict[str, str]],
               counts: dict[str, int] | None = None) -> BatchRecord:
        """Fold one progress event (Spark's progress JSON as a dict) into the batch's record and return it.

        `counts` are what the batch's write reported (`written`, `skipped`, `dead_letters`), when known."""
        duration_ms = int(progress.get("batchDuration") or progress.get("durationMs", {}).get("triggerExecution", 0))
        done = _unix(progress["timestamp"]) + duration_ms / 1000.0
        latest_sum = end_sum = 0
        held = False
        starts: dict[str, int] = {}
        ends: dict[str, int] = {}
        for src in progress.get("sources", []):
            end = _offsets(src.get("endOffset"))
            starts.update(_offsets(src.get("startOffset")))
            ends.update(end)
            latest = _offsets(src.get("latestOffset")) or end
            latest_sum += total(latest)
            end_sum += total(end)
            held = held or held_back(end, latest)
        self._recent.append((done, held))
        while self._recent and self._recent[0][0] < done - self.window_s:
            self._recent.popleft()
        bp = sum(1 for _, h in self._recent if h) / len(self._recent)
        counts = counts or {}
        obs = BatchRecord(
            time=round(done, 3),
            batch_id=int(progress["batchId"]),
            num_input_rows=int(progress.get("numInputRows", 0)),
            input_rate=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rate=float(progress.get("processedRowsPerSecond") or 0.0),
            batch_duration_ms=duration_ms,
            backlog=max(0, latest_sum - end_sum),
            held_back=held,
            bp_upstream=bp,
            bp_operator=0.0,
            bp_window_s=self.window_s,
            executors=tuple(Executor(str(e["id"]), str(e["host"])) for e in executors),
            # where the batch's time went (Spark's durationMs: latestOffset, queryPlanning, addBatch, walCommit...)
            phases_ms={str(k): int(v) for k, v in (progress.get("durationMs") or {}).items()},
            # the input range [start, end) per partition the batch read (the job has one source): what the
            # testbed's exactly-once accounting checks an aggregating query by (gesscale/testbed/keys.py)
            start_offsets=starts,
            end_offsets=ends,
            # rows a stateful query dropped as later than its watermark (0 for a stateless query)
            late_rows=sum(int(op.get("numRowsDroppedByWatermark") or 0)
                          for op in progress.get("stateOperators") or []),
            written=counts.get("written"),
            skipped=counts.get("skipped"),
            dead_letters=counts.get("dead_letters"),
        )
        self.latest = obs
        return obs

    def latest_dict(self) -> dict[str, Any] | None:
        """The latest record in its JSON form (the driver's `GET /observation`), None before the first batch."""
        return self.latest.to_dict() if self.latest is not None else None
