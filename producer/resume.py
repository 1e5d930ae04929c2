"""`gesscale produce --resume`: continue a run that was killed, without sending twice what the topic holds.

A replay is deterministic (the same file or seed and pacing give the same records, keys `<ride_id>-<dup>`), so
the resumed run regenerates the killed run's schedule, reads the topic once to learn which keys it already
holds, and skips those records; the rest (what the killed run never sent, never had acknowledged, or what the
broker lost) is sent, starting at once and keeping the schedule's pace from there. Resume into the topic the
killed run wrote to, with the same options: keys the topic holds from any earlier run count as sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from producer.audit import identity
from producer.records import RideEncoder
from producer.schedule import Scheduled


def held_ids(bootstrap: str, topic: str) -> set[bytes]:
    """The record ids (producer keys) the whole topic holds."""
    from gesscale.brokers.topics import read_values

    return {identity(value) for _, _, value in read_values(bootstrap, topic, settle_s=1.0)}


@dataclass
class ResumeCount:
    """How many scheduled records a resumed run skipped because the topic held them."""

    held: int = 0
    skipped: int = 0


def skip_held(schedule: Iterable[Scheduled[RideEncoder]], held: set[bytes],
              count: ResumeCount) -> Iterator[Scheduled[RideEncoder]]:  # fmt: skip
    """The records of `schedule` whose id is not in `held`, due times shifted so that the first is due at once."""
    count.held = len(held)
    offset: float | None = None
    for due, enc, dup in schedule:
        if held and identity(enc.value(dup)) in held:
            count.skipped += 1
            continue
        if offset is None:
            offset = due
        yield max(0.0, due - offset), enc, dup
