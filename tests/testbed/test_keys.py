"""Exactly-once accounting (gesscale/testbed/keys.py) on both bases, from records written here: the output-keys
basis of a per-record query, and the input-offsets basis of an aggregating one (each input record in exactly
one committed micro-batch, from the job's batches.jsonl completed by the checkpoint's offset log)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from gesscale.batch_record import BatchRecord
from gesscale.testbed.keys import (
    INPUT_OFFSETS,
    OUTPUT_KEYS,
    BatchRange,
    batch_ranges,
    coverage,
    tally,
)
from jobs.query import load_query


def ident(key: str, part: int, offset: int) -> bytes:
    """An input identity as `input_identity` makes it."""
    return f"{key}\0rides/{part}/{offset}".encode()


# partition 0: offsets 0-5; partition 1: offsets 0-3
INPUTS = [ident(f"k0-{o}", 0, o) for o in range(6)] + [ident(f"k1-{o}", 1, o) for o in range(4)]


def test_the_built_in_queries_choose_their_basis() -> None:
    assert load_query("nearest-landmark").per_record is True
    assert load_query("frequent-routes").per_record is False


def test_output_keys_basis_counts_lost_and_duplicated_by_key() -> None:
    out = Counter({f"k0-{o}".encode(): 1 for o in range(6)} | {b"k1-0": 2, b"k1-1": 1})
    dead = Counter({b"rides/1/2": 1})
    acc = tally(INPUTS, out, dead, consumed={0: 6, 1: 4})
    assert (acc.basis, acc.produced, acc.processed, acc.lost, acc.duplicated, acc.dead_letters) == \
        (OUTPUT_KEYS, 10, 9, 1, 1, 1)  # k1-3 lost, k1-0 twice
    assert tally(INPUTS, out, dead, consumed={0: 6, 1: 3}).unprocessed == 1  # k1-3 not read yet: not lost


def test_input_offsets_basis_needs_each_record_in_exactly_one_committed_batch() -> None:
    windows = Counter({b"2013-01-01T00:30:00": 1, b"2013-01-01T00:35:00": 1})
    ranges = [BatchRange(0, {}, {0: 3, 1: 2}), BatchRange(1, {0: 3, 1: 2}, {0: 6, 1: 4})]
    acc = tally(INPUTS, windows, Counter(), consumed={0: 6, 1: 4}, ranges=ranges)
    assert (acc.basis, acc.produced, acc.processed, acc.lost, acc.duplicated, acc.outputs) == \
        (INPUT_OFFSETS, 10, 10, 0, 0, 2)
    # a batch that read offsets 2-3 of partition 0 again, a window written twice, a gap at partition 1 offset 3
    bad = [BatchRange(0, {}, {0: 3, 1: 2}), BatchRange(1, {0: 2, 1: 2}, {0: 6, 1: 3})]
    acc = tally(INPUTS, windows + Counter({b"2013-01-01T00:30:00": 1}), Counter(), consumed={0: 6, 1: 4}, ranges=bad)
    assert (acc.processed, acc.lost, acc.duplicated) == (9, 1, 1 + 1)
    # the same gap past the last committed batch is a backlog left when the job stopped, not a loss
    acc = tally(INPUTS, windows, Counter(), consumed={0: 6, 1: 3}, ranges=bad[:1] + [BatchRange(1, {0: 3, 1: 2},
                                                                                              {0: 6, 1: 3})])
    assert (acc.processed, acc.unprocessed, acc.lost, acc.duplicated) == (9, 1, 0, 0)
    # a dead-lettered record counts as processed on either basis
    assert tally(INPUTS, windows, Counter({b"rides/1/3": 1}), {0: 6, 1: 3}, bad[:1]).processed == 3 + 2 + 1


def test_coverage_counts_overlaps_and_gaps() -> None:
    count = coverage([BatchRange(0, {}, {0: 4}), BatchRange(1, {0: 2}, {0: 5}), BatchRange(2, {0: 7}, {0: 8})])
    assert [count(0, o) for o in range(9)] == [1, 1, 2, 2, 1, 0, 0, 1, 0]
    assert count(1, 0) == 0


def _checkpoint(root: Path, ends: dict[int, dict[str, int]], committed: list[int]) -> Path:
    """A Spark checkpoint's offset log and commits (the format `committed_offsets` reads)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch, end in ends.items():
        (root / "offsets" / str(batch)).write_text("v1\n{\"batchWatermarkMs\":0}\n" + json.dumps(end))
    for batch in committed:
        (root / "commits" / str(batch)).write_text("v1\n{}")
    return root


def test_batch_ranges_come_from_the_observations_completed_by_the_checkpoint(tmp_path: Path) -> None:
    # batch 2 committed but its observation line never written (driver killed); batch 3 planned, not committed
    ck = _checkpoint(tmp_path / "ck", {1: {"0": 4}, 2: {"0": 6}, 3: {"0": 9}}, [1, 2])
    observations = [
        {"batch_id": 0, "start_offsets": {}, "end_offsets": {"0": 2}},
        {"batch_id": 1, "start_offsets": {"0": 2}, "end_offsets": {"0": 4}},
        {"batch_id": 1, "start_offsets": {"0": 2}, "end_offsets": {"0": 4}},  # the same batch twice: one batch
        {"batch_id": 7},  # a line from before the offsets were recorded is ignored
    ]
    timing = {"time": 1.0, "num_input_rows": 2, "batch_duration_ms": 100}
    ranges = batch_ranges(ck, [BatchRecord.from_dict({**timing, **o}) for o in observations])
    assert [(r.batch_id, r.start, r.end) for r in ranges] == [(0, {}, {0: 2}), (1, {0: 2}, {0: 4}),
                                                              (2, {0: 4}, {0: 6})]
    count = coverage(ranges)
    assert [count(0, o) for o in range(8)] == [1, 1, 1, 1, 1, 1, 0, 0]
