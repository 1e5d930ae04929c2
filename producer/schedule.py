"""When each record is due, in seconds after the start of a replay (pure, no I/O, no clock).

Two ways to pace a replay:
- `by_event_time`: follow the trace's own timestamps, `speed` times faster; the `duplication` copies of a ride
  are due together. A ride earlier than one already scheduled (the file is not sorted) is due at once, never
  reordered back in time.
- `by_rate_profile`: follow a records/s profile (gesscale.workloads.rate_profile, the simulator's workloads);
  rides are taken from the source only for their content, each one filling `duplication` consecutive records.

The rides may be `Ride`s or anything with their `event_time` (the replay schedules `RideEncoder`s).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Protocol, TypeVar


class Timed(Protocol):
    """A ride, or its encoder: something with the trace time it is scheduled by."""

    @property
    def event_time(self) -> datetime: ...


R = TypeVar("R")
T = TypeVar("T", bound=Timed)
Scheduled = tuple[float, R, int]  # (due second, ride, duplicate index)


def by_event_time(rides: Iterable[T], speed: float, duplication: int) -> Iterator[Scheduled[T]]:
    """Records due at (event_time - first event_time) / speed."""
    if speed <= 0:
        raise ValueError("speed must be > 0")
    if duplication < 1:
        raise ValueError("duplication must be >= 1")
    first = None
    latest = 0.0
    for ride in rides:
        if first is None:
            first = ride.event_time
        due = max(latest, (ride.event_time - first).total_seconds() / speed)
        latest = due
        for dup in range(duplication):
            yield due, ride, dup


def profile_times(profile: Sequence[float]) -> Iterator[float]:
    """Due times of the records of a records/s profile: second s holds its records evenly spread.

    Fractional rates carry over, so the total is floor(sum(profile)) (up to rounding).
    """
    carry = 0.0
    for second, rate in enumerate(profile):
        carry += float(rate)
        n = int(carry)
        carry -= n
        for j in range(n):
            yield second + j / n


def by_rate_profile(rides: Iterable[R], profile: Sequence[float], duplication: int) -> Iterator[Scheduled[R]]:
    """Records due per the profile (the times of `profile_times`); ends when the profile or the rides run out.

    This is the replay's per-record path, so `profile_times` is inlined (one generator step per record).
    """
    if duplication < 1:
        raise ValueError("duplication must be >= 1")
    rides_iter = iter(rides)
    ride = None
    dup = duplication
    carry = 0.0
    for second, rate in enumerate(profile):
        carry += float(rate)
        n = int(carry)
        carry -= n
        for j in range(n):
            if dup == duplication:
                ride = next(rides_iter, None)
                if ride is None:
                    return
                dup = 0
            yield second + j / n, ride, dup
            dup += 1
