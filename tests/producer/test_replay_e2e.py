"""End-to-end replays into the real embedded broker: the DEBS sample, rate fidelity, a broker outage."""

from __future__ import annotations

import csv
import json
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from gesscale.brokers import start_kafka
from gesscale.brokers.topics import ensure_topic, read_values
from gesscale.cli import main
from gesscale.process import free_port
from producer.run import ProduceOptions, produce
from tests.fixtures.kafka import KAFKA_PORTS, scratch_dir


def _keys(bootstrap: str, topic: str) -> list[str]:
    return [json.loads(value)["key"] for _, _, value in read_values(bootstrap, topic)]


def _independent_count(path: Path) -> tuple[Counter, list[int], list[int]]:
    """Skip reasons counted straight from the file (own code, not the producer's), kept line numbers, and the
    lines whose pickup has a zero coordinate (the data README's "50 rows with zero coordinates")."""
    reasons: Counter = Counter()
    kept, all_zero = [], []
    with path.open(newline="") as fh:
        for line, row in enumerate(csv.reader(fh), start=1):
            coords = [float(v) for v in row[6:10]]
            if 0 in coords[:2]:
                all_zero.append(line)
            lons, lats = coords[0::2], coords[1::2]
            if any(c == 0 for c in coords):
                reasons["zero_coordinates"] += 1
            elif not all(-74.3 <= x <= -73.6 for x in lons) or not all(40.45 <= y <= 41.0 for y in lats):
                reasons["outside_nyc"] += 1
            elif int(row[4]) <= 0 or row[3] < row[2]:
                reasons["non_positive_duration"] += 1
            else:
                kept.append(line)
    return reasons, kept, all_zero


@pytest.mark.e2e
def test_debs_sample_replay_puts_exactly_the_clean_rows_times_duplication(
    shared_data: Path, kafka_bootstrap: str, kafka_topic_factory, tmp_path: Path
) -> None:
    sample = shared_data / "debs2015-sample-3000.csv"
    topic = kafka_topic_factory(partitions=4, prefix="debs")
    out = tmp_path / "summary.json"
    code = main(["produce", str(sample), "--speed", "60", "--duplication", "3", "-b", kafka_bootstrap,
                 "-t", topic, "--json", str(out), "-q"])  # fmt: skip
    assert code == 0
    summary = json.loads(out.read_text())
    reasons, kept, all_zero = _independent_count(sample)

    assert summary["rows_read"] == 3000
    assert {k: v for k, v in summary["skipped"].items() if v} == dict(reasons)
    assert len(all_zero) == 50 and reasons["zero_coordinates"] >= 50  # the README's 50 rows are among them
    skipped = summary["skipped_total"]
    assert skipped == 3000 - len(kept)
    keys = _keys(kafka_bootstrap, topic)
    assert len(keys) == (3000 - skipped) * 3 == summary["acked"]
    assert set(keys) == {f"{line}-{dup}" for line in kept for dup in range(3)}
    assert not set(keys) & {f"{line}-0" for line in all_zero}


@pytest.mark.e2e
def test_rate_run_sends_every_record_once_and_reports_the_rate(
    kafka_bootstrap: str, kafka_topic_factory, tmp_path: Path
) -> None:
    """10 s synthetic run at 5,000 records/s (the acceptance run was 30 s: docs/data-plane.md; shortened for CI time);
    the rate itself is reported, not asserted."""
    topic = kafka_topic_factory(partitions=8, prefix="rate")
    out = tmp_path / "summary.json"
    code = main(["produce", "--rate", "5000", "--duration", "10", "--duplication", "1", "-b", kafka_bootstrap,
                 "-t", topic, "--json", str(out), "-q"])  # fmt: skip
    assert code == 0
    summary = json.loads(out.read_text())
    assert summary["sent"] == summary["acked"] == 50_000
    assert summary["skipped_total"] == 0 and summary["complete"]
    assert summary["target_rate"] == pytest.approx(5000, rel=0.001)
    keys = _keys(kafka_bootstrap, topic)
    assert len(keys) == len(set(keys)) == 50_000
    print(f"rate fidelity: target {summary['target_rate']} achieved {summary['achieved_rate']} records/s "
          f"({summary['rate_error_pct']} % short), worst lag {summary['worst_lag_s']} s")  # fmt: skip


@pytest.mark.e2e
def test_broker_outage_mid_replay_loses_nothing() -> None:
    """Broker stopped 3 s into a replay and back 3 s later: retries with backoff, reports, every key arrives."""
    scratch = scratch_dir("gesscale-fault-")
    broker = start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka")
    try:
        ensure_topic(broker.bootstrap, "rides", 4)
        messages: list[str] = []

        def outage() -> None:
            time.sleep(3)
            broker.stop()
            time.sleep(3)
            broker.restart()

        chaos = threading.Thread(target=outage)
        chaos.start()
        opts = ProduceOptions(rate=2000, duration_s=12, duplication=2, kafka=broker.bootstrap, topic="rides")
        result = produce(opts, messages.append)
        chaos.join()
        stats = result.stats
        assert stats.sent == stats.acked == 24_000 and stats.drained
        assert any("unreachable" in m for m in messages) and any("back after" in m for m in messages), messages
        keys = _keys(broker.bootstrap, "rides")
        expected = {f"s{ride}-{dup}" for ride in range(1, 12_001) for dup in range(2)}
        assert set(keys) == expected  # nothing lost; duplicates (re-sent after the outage) are allowed
        print(f"outage: {len(keys) - len(expected)} duplicates, {stats.resent} re-sent, "
              f"{stats.restored} restored after read-back; messages: {messages}")  # fmt: skip
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def test_unreadable_file_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["produce", str(tmp_path / "nope.csv"), "-b", "127.0.0.1:1"]) == 2  # no -q: no bar either
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gesscale: error: taxi file not found")


def test_bad_format_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    assert main(["produce", str(bad), "-b", "127.0.0.1:1", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a DEBS 2015 (17 columns) or trip_data (14 columns) taxi file" in err[0]


def test_unreachable_kafka_is_a_user_error(capsys) -> None:
    port = free_port(*KAFKA_PORTS)
    assert main(["produce", "--rate", "10", "--duration", "1", "-b", f"127.0.0.1:{port}", "-q"]) == 2
    assert "no Kafka broker answers" in capsys.readouterr().err
