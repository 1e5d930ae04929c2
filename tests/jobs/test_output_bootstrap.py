"""`--output-bootstrap`: the output and dead-letter topics on another Kafka than the input (no broker, no Spark).

Every Kafka call of the job is replaced by a recorder, so the tests check which address each one goes to: the
input's partitions on the input's Kafka; topic creation, the end offsets logged before a batch, the producer and
a replay's key scan on the output's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import jobs.job
import jobs.kafka_io
import jobs.kafka_sink
from gesscale.cli import main
from jobs.job import JobConfig, JobState, _batch_writer, _check_broker
from jobs.kafka_sink import WriteSpec, write_partition
from tests.jobs import ridegen

IN, OUT = "in-kafka:9092", "out-kafka:9093"


def config(tmp_path: Path, **extra: Any) -> JobConfig:
    return JobConfig(bootstrap=IN, input="rides", output="enriched", dead_letter="dlq", checkpoint=tmp_path / "ck",
                     **extra)


def test_the_output_kafka_defaults_to_the_input_kafka(tmp_path: Path) -> None:
    assert config(tmp_path).sink_bootstrap == IN
    assert config(tmp_path, output_bootstrap=OUT).sink_bootstrap == OUT


def test_the_cli_option_reaches_the_job_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[JobConfig] = []
    monkeypatch.setattr(jobs.job, "run", lambda cfg: seen.append(cfg))
    base = ["job", "run", "--bootstrap", IN, "--checkpoint", str(tmp_path / "ck")]
    assert main(base) == 0
    assert main([*base, "--output-bootstrap", OUT]) == 0
    assert [c.output_bootstrap for c in seen] == [None, OUT]
    assert [c.sink_bootstrap for c in seen] == [IN, OUT]


def test_input_is_checked_on_its_kafka_and_output_topics_are_created_on_the_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, list[str]]] = []
    created: list[tuple[str, str, int]] = []

    def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
        asked.append((bootstrap, topics))
        return dict.fromkeys(topics, 3)

    monkeypatch.setattr(jobs.kafka_io, "partition_counts", partition_counts)
    monkeypatch.setattr(jobs.kafka_io, "ensure_topic", lambda b, t, p: created.append((b, t, p)))
    assert _check_broker(config(tmp_path, output_bootstrap=OUT)) == 3
    assert asked == [(IN, ["rides"])]
    assert sorted(created) == [(OUT, "dlq", 3), (OUT, "enriched", 3)]


class RecordingOffsets:
    """Stands in for `OffsetsReader`: remembers its Kafka and answers end offsets 5 everywhere."""

    made: list[str] = []

    def __init__(self, bootstrap: str) -> None:
        RecordingOffsets.made.append(bootstrap)

    def end_offsets(self, topics: list[str]) -> dict[str, dict[int, int]]:
        return {t: {0: 5, 1: 5} for t in topics}


class CapturingFrame:
    """Stands in for a micro-batch DataFrame: keeps the writer's `mapInArrow` function instead of running it."""

    def __init__(self) -> None:
        self.specs: list[WriteSpec] = []

    def mapInArrow(self, fn: Any, schema: str) -> CapturingFrame:  # noqa: N802 - Spark's API
        self.specs.append(fn.keywords["spec"])
        return self

    def collect(self) -> list[dict[str, int]]:
        return [{"written": 0, "skipped": 0}]


def test_the_batch_writer_logs_and_writes_on_the_output_kafka(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[str] = []
    monkeypatch.setattr(jobs.kafka_io, "partition_counts",
                        lambda b, topics: counted.append(b) or dict.fromkeys(topics, 2))
    monkeypatch.setattr(jobs.kafka_io, "OffsetsReader", RecordingOffsets)
    RecordingOffsets.made.clear()
    write = _batch_writer(config(tmp_path, output_bootstrap=OUT), JobState())
    frame = CapturingFrame()
    write(frame, 0)
    write(frame, 0)  # the same batch again: a replay after a crash
    assert counted == [OUT] and RecordingOffsets.made == [OUT]
    first, again = frame.specs
    assert (first.bootstrap, first.replay) == (OUT, False)
    assert (again.bootstrap, again.replay) == (OUT, True)
    assert (again.output, again.partitions, again.starts) == ("enriched", 2, {0: 5, 1: 5})


class RecordingProducer:
    """Stands in for `BatchProducer`: remembers its Kafka and what was sent."""

    made: list[str] = []
    sent: list[tuple[str, int, bytes]] = []

    def __init__(self, bootstrap: str) -> None:
        RecordingProducer.made.append(bootstrap)

    def send(self, topic: str, partition: int, key: bytes, value: bytes) -> None:
        RecordingProducer.sent.append((topic, partition, key))

    def flush(self) -> None:
        return

    def close(self) -> None:
        return


def test_a_replayed_task_scans_and_writes_the_output_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    (_, value_a, _), (_, value_b, _) = ridegen.values(2)
    key_a, key_b = (json.loads(v)["key"].encode() for v in (value_a, value_b))
    scans: list[tuple[str, str, int, int]] = []

    def read_keys(bootstrap: str, topic: str, partition: int, start: int) -> set[bytes]:
        scans.append((bootstrap, topic, partition, start))
        return {key_a}  # the first record made it out before the crash

    monkeypatch.setattr(jobs.kafka_sink, "read_keys", read_keys)
    monkeypatch.setattr(jobs.kafka_sink, "BatchProducer", RecordingProducer)
    RecordingProducer.made.clear()
    RecordingProducer.sent.clear()
    spec = WriteSpec(OUT, "enriched", 2, {0: 7, 1: 0}, replay=True)
    batch = pa.RecordBatch.from_pydict({"partition": [2, 2], "key": [key_a, key_b], "value": [value_a, value_b]})
    (counts,) = write_partition(iter([batch]), spec)
    assert scans == [(OUT, "enriched", 0, 7)]
    assert RecordingProducer.made == [OUT]
    assert RecordingProducer.sent == [("enriched", 0, key_b)]
    assert counts.to_pydict() == {"written": [1], "skipped": [1]}
