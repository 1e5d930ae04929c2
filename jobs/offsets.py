"""Offset arithmetic of the Kafka source, kept pure so it is tested without a broker or Spark.

An offset of the source is a dict `{"<partition>": <next offset to read>}` (string keys, because Spark stores
offsets as JSON). A micro-batch reads, per partition, the half-open range [start, end).
"""

from __future__ import annotations

from dataclasses import dataclass

Offsets = dict[str, int]


@dataclass(frozen=True)
class Range:
    """Records [start, until) of one Kafka partition: the unit of work of one Spark task."""

    partition: int
    start: int
    until: int

    @property
    def size(self) -> int:
        """Number of offsets in the range."""
        return self.until - self.start


def normalise(offsets: dict) -> Offsets:
    """Return offsets with string partition keys and int values (JSON round trips turn ints into strings)."""
    return {str(int(p)): int(o) for p, o in offsets.items()}


def cap(start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
    """End offsets of the next batch: `latest`, or at most `max_rows` records past `start` in total.

    A partition missing from `start` counts from offset 0 (the reader fills in the beginning offsets of new
    partitions first). The budget is shared fairly: each round gives every partition that still has data an
    equal share, so one busy partition cannot starve the others. The result never goes below `start`.
    """
    end = {p: max(start.get(p, 0), o) for p, o in latest.items()}
    for p, o in start.items():
        end.setdefault(p, o)
    if max_rows is None:
        return end
    if max_rows < 0:
        raise ValueError("max_rows must be >= 0")
    want = {p: end[p] - start.get(p, 0) for p in end}
    take = {p: 0 for p in end}
    budget = max_rows
    while budget > 0:
        hungry = sorted((p for p in want if want[p] > take[p]), key=int)
        if not hungry:
            break
        share = max(1, budget // len(hungry))
        for p in hungry:
            grant = min(share, want[p] - take[p], budget)
            take[p] += grant
            budget -= grant
            if budget == 0:
                break
    return {p: start.get(p, 0) + take[p] for p in end}


def split(start: Offsets, end: Offsets, max_per_range: int) -> list[Range]:
    """Cut the batch [start, end) into ranges of at most `max_per_range` records, one list entry per task.

    Ranges of one partition are contiguous and in order; empty partitions give no range.
    """
    if max_per_range <= 0:
        raise ValueError("max_per_range must be > 0")
    ranges: list[Range] = []
    for p in sorted(end, key=int):
        lo, hi = start.get(p, 0), end[p]
        while lo < hi:
            step = min(max_per_range, hi - lo)
            ranges.append(Range(int(p), lo, lo + step))
            lo += step
    return ranges


def total(offsets: Offsets) -> int:
    """Σ of the offsets (used for backlog = Σ latest − Σ end)."""
    return sum(offsets.values())


def held_back(end: Offsets, latest: Offsets) -> bool:
    """True when the batch stopped short of what was available in some partition (the source held data back)."""
    return any(latest.get(p, 0) > o for p, o in end.items()) or any(p not in end for p in latest)
