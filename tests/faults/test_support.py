"""The fault suite's pure helpers: the key tally and the benchmark's summary."""

from __future__ import annotations

from collections import Counter

from benchmarks.bench_faults import summarize, table
from tests.faults.support import fault, tally


def test_tally_counts_missing_keys_as_lost_and_extra_copies_or_strangers_as_duplicated() -> None:
    assert tally(Counter({"a": 1, "b": 1}), ["a", "b"]) == (0, 0)
    assert tally(Counter({"a": 2}), ["a", "b"]) == (1, 1)
    assert tally(Counter({"a": 1, "b": 1, "x": 1}), ["a", "b"]) == (0, 1)


def test_the_same_seed_draws_the_same_moment(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("GESSCALE_FAULT_SEED", "7")
    assert fault("x").moment(0, 10) == fault("x").moment(0, 10) != fault("y").moment(0, 10)


def test_summary_adds_up_the_runs_of_each_fault() -> None:
    rows = [{"fault": "a", "seed": 1, "sent": 10, "lost": 0, "duplicated": 1, "reported": "r1"},
            {"fault": "b", "seed": 1, "sent": 5, "lost": 0, "duplicated": 0, "reported": ""},
            {"fault": "a", "seed": 2, "sent": 10, "lost": 2, "duplicated": 0, "reported": "r2"}]
    lines = summarize(rows)
    assert [(s["fault"], s["runs"], s["sent"], s["lost"], s["duplicated"]) for s in lines] == \
        [("a", 2, 20, 2, 1), ("b", 1, 5, 0, 0)]
    assert "| a | 2 | 20 | 2 | 1 | r2 |" in table(lines)
