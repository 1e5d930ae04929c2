"""The job's record of one micro-batch: the one typed form of the line it writes per batch.

The Spark job (`jobs/observation.py`) builds a `BatchRecord` from each progress event and writes `to_dict()` as
one JSON line (`batches.jsonl` on the testbed) and as its `GET /observation` answer (Kubernetes). Every reader
turns such a dict back into a record with `BatchRecord.from_dict`, the single parser, and reads attributes: the
wire format (the JSON keys) is defined here and nowhere else.

Keys, in the order the job writes them (docs/controller.md for back pressure):
`time` (completion, unix s), `batch_id`, `num_input_rows`, `input_rate` and `processed_rate` (Spark's rows/s),
`batch_duration_ms`, `backlog` (Σ latest − Σ end offsets of the input when the batch was planned), `held_back`
(admission control bound the batch), `bp_upstream` (share of held-back batches in the last `bp_window_s`),
`bp_operator`, `bp_window_s`, `executors` ([{id, host}]), `phases_ms` (Spark's durationMs), `start_offsets` and
`end_offsets` (the input range per partition), `late_rows` (dropped behind the watermark); and, once the batch's
write has reported them, `written`, `skipped` and `dead_letters`.

Only `time`, `batch_id`, `num_input_rows` and `batch_duration_ms` are required: lines written before the other
keys existed still parse (with zeros, and `end_offsets` None for "no input range recorded").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REQUIRED = ("time", "batch_id", "num_input_rows", "batch_duration_ms")
KEYS = (
    "time", "batch_id", "num_input_rows", "input_rate", "processed_rate", "batch_duration_ms", "backlog",
    "held_back", "bp_upstream", "bp_operator", "bp_window_s", "executors", "phases_ms", "start_offsets",
    "end_offsets", "late_rows",
)
COUNT_KEYS = ("written", "skipped", "dead_letters")  # added by the batch's write (jobs/job.py), when known


class BatchRecordError(ValueError):
    """A dict that is not a batch record (missing key, wrong type): says which key and what it held."""


@dataclass(frozen=True)
class Executor:
    """An executor the job had when the batch completed."""

    id: str
    host: str

    def to_dict(self) -> dict[str, str]:
        """JSON form: `{"id", "host"}`."""
        return {"id": self.id, "host": self.host}


def _number(d: Mapping[str, Any], key: str, default: float | None = None) -> float:
    value = d.get(key, default)
    if value is None and default is not None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BatchRecordError(f"batch record: {key!r} must be a number, got {value!r}")
    return value


def _int(d: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = _number(d, key, default)
    if isinstance(value, float) and not value.is_integer():
        raise BatchRecordError(f"batch record: {key!r} must be a whole number, got {value!r}")
    return int(value)


def _int_map(d: Mapping[str, Any], key: str) -> dict[str, int] | None:
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BatchRecordError(f"batch record: {key!r} must be an object, got {value!r}")
    return {str(k): _int(value, k) for k in value}


def _executors(d: Mapping[str, Any]) -> tuple[Executor, ...]:
    value = d.get("executors")
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise BatchRecordError(f"batch record: 'executors' must be a list, got {value!r}")
    out = []
    for e in value:
        if not isinstance(e, Mapping) or "id" not in e or "host" not in e:
            raise BatchRecordError(f"batch record: an executor must be {{'id', 'host'}}, got {e!r}")
        out.append(Executor(str(e["id"]), str(e["host"])))
    return tuple(out)


@dataclass(frozen=True)
class BatchRecord:
    """One completed micro-batch as the job measured it (module docstring for the meaning of each field)."""

    time: float
    batch_id: int
    num_input_rows: int
    batch_duration_ms: int
    input_rate: float = 0.0
    processed_rate: float = 0.0
    backlog: int = 0
    held_back: bool = False
    bp_upstream: float = 0.0
    bp_operator: float = 0.0
    bp_window_s: float = 0.0
    executors: tuple[Executor, ...] = ()
    phases_ms: Mapping[str, int] = field(default_factory=dict)
    start_offsets: Mapping[str, int] = field(default_factory=dict)
    end_offsets: Mapping[str, int] | None = None  # None: a line from before input ranges were recorded
    late_rows: int = 0
    written: int | None = None
    skipped: int | None = None
    dead_letters: int | None = None

    @property
    def started(self) -> float:
        """When the batch started (unix s): its completion `time` minus its duration."""
        return self.time - self.batch_duration_ms / 1000.0

    @classmethod
    def from_dict(cls, d: Any) -> BatchRecord:
        """Parse one record as the job writes it (the only parser); `BatchRecordError` names what is wrong."""
        if not isinstance(d, Mapping):
            raise BatchRecordError(f"a batch record must be a JSON object, got {type(d).__name__}: {d!r:.80}")
        missing = [k for k in REQUIRED if d.get(k) is None]
        if missing:
            raise BatchRecordError(f"batch record lacks {', '.join(map(repr, missing))}: {dict(d)!r:.200}")
        held = d.get("held_back") or False
        if not isinstance(held, bool | int):
            raise BatchRecordError(f"batch record: 'held_back' must be true or false, got {held!r}")
        counts = {k: _int(d, k) if d.get(k) is not None else None for k in COUNT_KEYS}
        return cls(
            time=float(_number(d, "time")),
            batch_id=_int(d, "batch_id"),
            num_input_rows=_int(d, "num_input_rows"),
            batch_duration_ms=_int(d, "batch_duration_ms"),
            input_rate=float(_number(d, "input_rate", 0.0)),
            processed_rate=float(_number(d, "processed_rate", 0.0)),
            backlog=_int(d, "backlog", 0),
            held_back=bool(held),
            bp_upstream=float(_number(d, "bp_upstream", 0.0)),
            bp_operator=float(_number(d, "bp_operator", 0.0)),
            bp_window_s=float(_number(d, "bp_window_s", 0.0)),
            executors=_executors(d),
            phases_ms=_int_map(d, "phases_ms") or {},
            start_offsets=_int_map(d, "start_offsets") or {},
            end_offsets=_int_map(d, "end_offsets"),
            late_rows=_int(d, "late_rows", 0),
            **counts,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the job writes: `KEYS` in order (`end_offsets` only when known), then the counts of the
        batch's write that are known."""
        d: dict[str, Any] = {
            "time": self.time,
            "batch_id": self.batch_id,
            "num_input_rows": self.num_input_rows,
            "input_rate": self.input_rate,
            "processed_rate": self.processed_rate,
            "batch_duration_ms": self.batch_duration_ms,
            "backlog": self.backlog,
            "held_back": self.held_back,
            "bp_upstream": self.bp_upstream,
            "bp_operator": self.bp_operator,
            "bp_window_s": self.bp_window_s,
            "executors": [e.to_dict() for e in self.executors],
            "phases_ms": dict(self.phases_ms),
            "start_offsets": dict(self.start_offsets),
        }
        if self.end_offsets is not None:
            d["end_offsets"] = dict(self.end_offsets)
        d["late_rows"] = self.late_rows
        for key in COUNT_KEYS:
            if (value := getattr(self, key)) is not None:
                d[key] = value
        return d
