"""The job's per-batch record (gesscale/batch_record.py) and the one record of a reconfiguration, on the files a
live run wrote: the shortened live demo's `batches.jsonl` and `reconfigurations.jsonl` (tests/data, recorded
from tests/testbed/test_live_e2e.py on the local testbed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.batch_record import COUNT_KEYS, KEYS, BatchRecord, BatchRecordError, Executor
from gesscale.observation import Reconfiguration

DATA = Path(__file__).parent / "data"


def recorded_lines(name: str) -> list[dict]:
    """The JSON lines of a recorded file in tests/data."""
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def test_every_recorded_line_parses_and_writes_back_the_same_json() -> None:
    lines = recorded_lines("live_demo_batches.jsonl")
    assert len(lines) == 41
    for line in lines:
        record = BatchRecord.from_dict(line)
        assert record.to_dict() == line
        assert list(record.to_dict()) == list(line)  # same keys in the same order: the wire format is unchanged
        assert list(line) == [*KEYS, *COUNT_KEYS]


def test_a_recorded_line_reads_as_typed_fields() -> None:
    third = BatchRecord.from_dict(recorded_lines("live_demo_batches.jsonl")[2])
    assert (third.batch_id, third.num_input_rows, third.batch_duration_ms, third.backlog) == (2, 2000, 6573, 999)
    assert third.held_back is True and third.bp_upstream == 1.0 and third.bp_window_s == 5.0
    assert third.executors == (Executor("0", "127.0.0.31"),)
    assert third.end_offsets is not None and sum(third.end_offsets.values()) - sum(third.start_offsets.values()) \
        == third.num_input_rows
    assert third.started == pytest.approx(third.time - 6.573)
    assert (third.written, third.skipped, third.dead_letters) == (2000, 0, 0)


def test_an_older_or_shorter_line_gets_defaults() -> None:
    record = BatchRecord.from_dict({"time": 5, "batch_id": 1, "num_input_rows": 10, "batch_duration_ms": 200.0})
    assert record == BatchRecord(time=5.0, batch_id=1, num_input_rows=10, batch_duration_ms=200)
    assert record.end_offsets is None and record.written is None and not record.held_back
    wire = record.to_dict()
    assert "end_offsets" not in wire and not set(COUNT_KEYS) & set(wire)  # unknown stays unknown
    assert BatchRecord.from_dict(wire) == record


@pytest.mark.parametrize(("bad", "message"), [
    ([1, 2], "must be a JSON object, got list"),
    ({"batch_id": 1}, "lacks 'time', 'num_input_rows', 'batch_duration_ms'"),
    ({"time": 1.0, "batch_id": "7", "num_input_rows": 1, "batch_duration_ms": 1}, "'batch_id' must be a number"),
    ({"time": 1.0, "batch_id": 1.5, "num_input_rows": 1, "batch_duration_ms": 1}, "'batch_id' must be a whole"),
    ({"time": True, "batch_id": 1, "num_input_rows": 1, "batch_duration_ms": 1}, "'time' must be a number"),
    ({"time": 1.0, "batch_id": 1, "num_input_rows": 1, "batch_duration_ms": 1, "backlog": None, "executors": {}},
     "'executors' must be a list"),
    ({"time": 1.0, "batch_id": 1, "num_input_rows": 1, "batch_duration_ms": 1, "executors": [{"id": "0"}]},
     "an executor must be"),
    ({"time": 1.0, "batch_id": 1, "num_input_rows": 1, "batch_duration_ms": 1, "end_offsets": [3]},
     "'end_offsets' must be an object"),
    ({"time": 1.0, "batch_id": 1, "num_input_rows": 1, "batch_duration_ms": 1, "held_back": "yes"},
     "'held_back' must be true or false"),
])
def test_a_malformed_record_is_refused_with_what_is_wrong(bad: object, message: str) -> None:
    with pytest.raises(BatchRecordError, match=message):
        BatchRecord.from_dict(bad)
    assert issubclass(BatchRecordError, ValueError)


def test_a_recorded_reconfiguration_line_is_a_decision_joined_with_its_measurement() -> None:
    up, down = recorded_lines("live_demo_reconfigurations.jsonl")
    # what the MAPE loop records, and what the local backend measured of the same change
    decided = Reconfiguration(time_s=up["time_s"], kind="up", added=("fog2",), removed=(), nodes=("fog1", "fog2"),
                              nd_max_ms=up["nd_max_ms"], pause_s=up["pause_s"], reason=up["reason"])
    measured = Reconfiguration(time_s=109.3331, kind="up", added=("fog2",), removed=(), nodes=("fog1", "fog2"),
                               nd_max_ms=up["nd_max_ms"], pause_s=7.2619, strategy="live", started_s=109.3331,
                               took_s=34.63312, effective_s=150.23296)
    line = decided.with_measurement(measured, strategy="live").to_dict()
    assert line == up and list(line) == list(up)  # the reconfigurations.jsonl keys, in order
    assert decided.with_measurement(measured).to_dict() == up  # the strategy the backend recorded
    # the same line as the live controller's merge of the two records' JSON forms (gesscale/testbed/controller.py)
    timing = {k: v for k, v in measured.to_dict().items() if k in ("started_s", "took_s", "effective_s")}
    assert {**decided.to_dict(), "strategy": "live", **timing} == line
    # without a measurement: the decision and the strategy only
    bare = decided.with_measurement(None, strategy="restart").to_dict()
    assert bare == {k: v for k, v in up.items() if k not in ("started_s", "took_s", "effective_s")} | \
        {"strategy": "restart"}
    # a simulated change keeps the keys it always had
    assert list(decided.to_dict()) == ["time_s", "kind", "added", "removed", "nodes", "nd_max_ms", "pause_s",
                                       "reason"]
    assert down["kind"] == "down" and down["started_s"] <= down["effective_s"]
