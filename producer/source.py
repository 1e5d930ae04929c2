"""Ride sources for a replay: a taxi file (read, cleaned, counted) or the synthetic trace.

A source is iterated either as rides (`iter(source)`) or as rides ready to send (`source.encoded()`, what the
replay uses: the synthetic trace encodes a whole generated hour at once there); one source is read one way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from producer.cleaning import SKIP_REASONS, parse_ride
from producer.formats import detect, rows
from producer.records import Ride, RideEncoder
from producer.synthetic import synthetic_encoded, synthetic_rides


class RideSource:
    """Iterable of rides that counts the rows it read and the rows it skipped, by reason."""

    def __init__(
        self, rides: Iterator[Ride], description: str, encoded: Callable[[], Iterator[RideEncoder]] | None = None
    ) -> None:
        self._rides = rides
        self._encoded = encoded
        self.description = description
        self.read = 0
        self.skipped: Counter[str] = Counter({reason: 0 for reason in SKIP_REASONS})

    def __iter__(self) -> Iterator[Ride]:
        return self._rides

    def encoded(self) -> Iterator[RideEncoder]:
        """The rides as encoders, in the same order (built in bulk when the source can)."""
        return self._encoded() if self._encoded is not None else map(RideEncoder, self._rides)


def file_source(path: Path, fmt: str = "auto") -> RideSource:
    """Rides of a DEBS 2015 or trip_data file (plain or gzip); the format is checked before anything is sent."""
    taxi = detect(path, fmt)

    def generate() -> Iterator[Ride]:
        columns = taxi.columns
        for line, fields in rows(taxi):
            source.read += 1
            ride = parse_ride(fields, columns, str(line))
            if isinstance(ride, str):
                source.skipped[ride] += 1
            else:
                yield ride

    gz = ", gzip" if taxi.gzipped else ""
    source = RideSource(generate(), f"{path} ({taxi.fmt}{gz})")
    return source


def synthetic_source(days: float | None, rides_per_day: int, seed: int) -> RideSource:
    """The synthetic diurnal trace (docs/scenarios.md); nothing is ever skipped."""

    def generate() -> Iterator[Ride]:
        for ride in synthetic_rides(days=days, rides_per_day=rides_per_day, seed=seed):
            source.read += 1
            yield ride

    def encoded() -> Iterator[RideEncoder]:
        for chunk in synthetic_encoded(days=days, rides_per_day=rides_per_day, seed=seed):
            for encoder in chunk:
                source.read += 1
                yield encoder

    span = "endless" if days is None else f"{days:g} day(s)"
    description = f"synthetic taxi trace ({span}, {rides_per_day} rides/day, seed {seed})"
    source = RideSource(generate(), description, encoded)
    return source
