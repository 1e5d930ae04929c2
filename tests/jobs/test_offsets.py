"""Offset planning of the Kafka source: admission control, range splitting, held-back detection."""

from __future__ import annotations

import pytest

from jobs.offsets import Range, cap, held_back, normalise, split, total


def test_cap_without_limit_takes_everything_and_never_goes_back() -> None:
    assert cap({"0": 5, "1": 7}, {"0": 10, "1": 7}, None) == {"0": 10, "1": 7}
    assert cap({"0": 12}, {"0": 10}, None) == {"0": 12}


def test_cap_shares_the_budget_fairly_and_respects_it_exactly() -> None:
    end = cap({"0": 0, "1": 0, "2": 0}, {"0": 1000, "1": 3, "2": 1000}, 101)
    assert total(end) == 101
    assert end["1"] == 3  # the small partition is served in full
    assert abs(end["0"] - end["2"]) <= 1


def test_cap_counts_new_partitions_from_zero_and_stops_when_drained() -> None:
    assert cap({"0": 4}, {"0": 6, "1": 2}, 100) == {"0": 6, "1": 2}
    assert cap({"0": 4}, {"0": 4}, 10) == {"0": 4}
    with pytest.raises(ValueError):
        cap({}, {}, -1)


def test_split_cuts_contiguous_ranges_per_partition() -> None:
    ranges = split({"0": 10, "1": 0}, {"0": 35, "1": 0, "2": 3}, 10)
    assert ranges == [Range(0, 10, 20), Range(0, 20, 30), Range(0, 30, 35), Range(2, 0, 3)]
    assert sum(r.size for r in ranges) == 28
    with pytest.raises(ValueError):
        split({}, {"0": 1}, 0)


def test_normalise_and_held_back() -> None:
    assert normalise({0: "3", "1": 4}) == {"0": 3, "1": 4}
    assert held_back({"0": 5}, {"0": 6})
    assert held_back({"0": 5}, {"0": 5, "1": 1})
    assert not held_back({"0": 5, "1": 2}, {"0": 5, "1": 2})


def test_a_fetch_is_sized_to_its_range() -> None:
    from jobs.kafka_source import fetch_size

    assert fetch_size(Range(0, 0, 50)) == 64 << 10  # small ranges: 64 KiB, not the 16 MiB a backlog would fill
    assert fetch_size(Range(0, 1_000, 5_000)) == 4_000 * 512
    assert fetch_size(Range(0, 0, 10**6)) == 16 << 20
