"""The sink log records where each batch starts writing, once, and tells a replay from a first run."""

from __future__ import annotations

from pathlib import Path

from jobs.kafka_sink import KEEP_ENTRIES, SinkLog


def test_first_run_snapshots_and_replay_reads_back(tmp_path: Path) -> None:
    log = SinkLog(tmp_path)
    calls = []

    def snapshot() -> dict:
        calls.append(1)
        return {"out": {0: 5, 1: 7}, "dlq": {0: 0}}

    starts, replay = log.begin(3, snapshot)
    assert (starts, replay) == ({"out": {0: 5, 1: 7}, "dlq": {0: 0}}, False)
    again, replay = log.begin(3, lambda: {"out": {0: 99}})
    assert again == starts and replay is True
    assert len(calls) == 1


def test_old_entries_are_pruned(tmp_path: Path) -> None:
    log = SinkLog(tmp_path)
    for b in range(KEEP_ENTRIES + 5):
        log.begin(b, lambda: {"t": {0: 0}})
    names = sorted(int(p.name) for p in log.dir.iterdir())
    assert len(names) == KEEP_ENTRIES and names[0] == 5
