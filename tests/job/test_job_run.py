"""`gesscale job run` as a process on the session's Kafka broker: exactly-once across kill -9, and user errors."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

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
    args = job_args(kafka_bootstrap, inp, out, dlq, tmp_path / "ck", "--max-rows-per-batch", "25000",
                    "--metrics-jsonl", str(metrics))
    first = JobProcess(args, tmp_path / "run1.log")
    wait_for(lambda: len(observations(metrics)) >= 1, 300, "a completed batch", first)

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
def test_frequent_routes_kill9_then_restart_writes_each_closed_window_once_as_the_reference_says(
        kafka_bootstrap: str, kafka_topic_factory: Any, tmp_path: Path) -> None:
    from tests.job.routes_reference import top_routes
    from tests.job.test_frequent_routes import generated_records, produce_records, sentinel, windows_written

    recs = generated_records(500_000, 3, seed=3)
    recs.append(sentinel(recs[-1], 60))
    inp, out, dlq = (kafka_topic_factory(partitions=2, prefix=p) for p in ("in", "out", "dlq"))
    produce_records(kafka_bootstrap, inp, recs, 2)
    metrics = tmp_path / "metrics.jsonl"
    args = job_args(kafka_bootstrap, inp, out, dlq, tmp_path / "ck", "--query", "frequent-routes",
                    "--max-rows-per-batch", "4000", "--metrics-jsonl", str(metrics))
    first = JobProcess(args, tmp_path / "run1.log")
    wait_for(lambda: sum(o["num_input_rows"] for o in observations(metrics)) >= 12_000, 300, "three batches", first)
    first.kill9()
    assert sum(o["num_input_rows"] for o in observations(metrics)) < len(recs), "finished before the kill"

    second = JobProcess([*args, "--stop-when-idle-s", "5"], tmp_path / "run2.log")
    assert second.wait(600) == 0, (tmp_path / "run2.log").read_text()[-3000:]
    got = windows_written(kafka_bootstrap, out)  # fails on a window written twice
    want = top_routes(recs)
    assert len(want) >= 30 and sorted(got) == sorted(want)
    assert all(got[end] == routes for end, routes in want.items())


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
