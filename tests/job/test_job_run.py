"""`gesscale job run` end to end on the session's Kafka broker: exactly-once across kill -9, dead letters,
the Parquet sink, and user errors."""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from gesscale.cli import main
from jobs.kafka_io import end_offsets
from tests.job import ridegen
from tests.job.jobproc import JobProcess, observations, wait_for


def job_args(bootstrap: str, inp: str, out: str, dlq: str, ck: Path, *extra: str) -> list[str]:
    return ["--bootstrap", bootstrap, "--input", inp, "--output", out, "--dead-letter", dlq, "--checkpoint",
            str(ck), "--ui-port", "14060", *extra]


@pytest.mark.e2e
def test_kill9_mid_run_then_restart_writes_every_key_exactly_once(kafka_bootstrap: str, kafka_topic_factory: Any,
                                                                   tmp_path: Path) -> None:
    n = 200_000
    inp, out, dlq = (kafka_topic_factory(partitions=4, prefix=p) for p in ("in", "out", "dlq"))
    good = ridegen.produce(kafka_bootstrap, inp, n, partitions=4)
    metrics = tmp_path / "metrics.jsonl"
    args = job_args(kafka_bootstrap, inp, out, dlq, tmp_path / "ck", "--max-rows-per-batch", "20000",
                    "--metrics-jsonl", str(metrics))
    first = JobProcess(args, tmp_path / "run1.log")
    wait_for(lambda: len(observations(metrics)) >= 2, 300, "two completed batches", first)

    def output_total() -> int:
        return sum(end_offsets(kafka_bootstrap, [out])[out].values())

    done = sum(o.get("written", 0) for o in observations(metrics))
    # kill while a batch is part-way through its write when we can catch it, so the replay path is exercised
    with contextlib.suppress(AssertionError):
        wait_for(lambda: output_total() > done, 30, "a batch part-way through its write", first, poll_s=0.02)
    first.kill9()
    written_before = output_total()
    assert written_before < n, "the job finished before the kill; the test needs more input"

    second = JobProcess([*args, "--stop-when-idle-s", "5"], tmp_path / "run2.log")
    assert second.wait(600) == 0, (tmp_path / "run2.log").read_text()[-3000:]
    keys = [k for k, _ in ridegen.read_all(kafka_bootstrap, out)]
    assert len(keys) == n
    assert set(keys) == good
    assert ridegen.read_all(kafka_bootstrap, dlq) == []


@pytest.mark.e2e
def test_malformed_records_go_to_the_dead_letter_topic_and_the_rest_is_processed(
        kafka_bootstrap: str, kafka_topic_factory: Any, tmp_path: Path) -> None:
    inp, out, dlq = (kafka_topic_factory(partitions=2, prefix=p) for p in ("in", "out", "dlq"))
    good = ridegen.produce(kafka_bootstrap, inp, 10_000, partitions=2, malformed_every=100)
    assert len(good) == 9_900
    job = JobProcess(job_args(kafka_bootstrap, inp, out, dlq, tmp_path / "ck", "--stop-when-idle-s", "3"),
                     tmp_path / "run.log")
    assert job.wait(600) == 0, (tmp_path / "run.log").read_text()[-3000:]
    output = ridegen.read_all(kafka_bootstrap, out)
    assert sorted(k for k, _ in output) == sorted(good)
    sample = json.loads(output[0][1])
    assert sample["nearest_landmark"] and sample["landmark_distance"] >= 0
    dead = ridegen.read_all(kafka_bootstrap, dlq)
    assert len(dead) == 100 and len({k for k, _ in dead}) == 100
    for key, value in dead:
        body = json.loads(value)
        assert body["reason"] and body["raw"] and body["topic"] == inp
        assert key.decode() == f"{inp}/{body['partition']}/{body['offset']}"


@pytest.mark.e2e
def test_parquet_sink_writes_the_enriched_rows(kafka_bootstrap: str, kafka_topic_factory: Any,
                                               tmp_path: Path) -> None:
    inp, dlq = (kafka_topic_factory(partitions=2, prefix=p) for p in ("in", "dlq"))
    good = ridegen.produce(kafka_bootstrap, inp, 3_000, partitions=2, malformed_every=50)
    out = tmp_path / "enriched"
    job = JobProcess(job_args(kafka_bootstrap, inp, str(out), dlq, tmp_path / "ck", "--sink", "parquet",
                              "--available-now"), tmp_path / "run.log")
    assert job.wait(600) == 0, (tmp_path / "run.log").read_text()[-3000:]
    table = pq.read_table(out)
    assert sorted(k.encode() for k in table.column("key").to_pylist()) == sorted(good)
    assert set(table.column("nearest_landmark").to_pylist()) <= {"times_square", "central_park", "brooklyn_bridge"}
    assert len(ridegen.read_all(kafka_bootstrap, dlq)) == 60


def test_user_mistakes_are_one_line_errors(kafka_bootstrap: str, kafka_topic_factory: Any, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    base = ["job", "run", "--bootstrap", kafka_bootstrap, "--checkpoint", str(tmp_path / "ck")]
    assert main([*base, "--input", "no-such-topic-xyz"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([*base, "--input", "a", "--sink", "csv"]) == 2
    assert "--sink" in capsys.readouterr().err
    topic = kafka_topic_factory()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 18092))
        taken.listen()
        assert main([*base, "--input", topic, "--http-port", "18092"]) == 2
    err = capsys.readouterr().err
    assert "18092" in err and len(err.strip().splitlines()) == 1
