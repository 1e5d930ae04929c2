"""The synthetic taxi trace used when no file is given (docs/scenarios.md), deterministic for a seed.

Ride completions arrive as a Poisson process whose hourly mean follows the weekday NYC shape of
`gesscale.workloads` (the simulator's taxi workload: one definition of the shape for both), ~500 k rides a
day by default. Pickups are drawn around Midtown Manhattan, trip times from a gamma distribution (median about
9 minutes), distances from an ~11 mph average speed; every coordinate stays inside the NYC box of the cleaning
rules, so synthetic rides are never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import numpy as np

from gesscale.workloads import rate_profile
from producer.cleaning import NYC_LAT, NYC_LON
from producer.records import Ride, RideColumns, RideEncoder

DEFAULT_START = datetime(2013, 5, 1)  # the Gesscale paper replays the first two days of May 2013
CHUNK_S = 3600
_CENTRE = (-73.980, 40.755)  # Midtown Manhattan
_SPREAD = (0.025, 0.035)  # degrees (lon, lat), one standard deviation
_MILES_PER_DEG = (52.4, 69.0)  # at 40.75 N


def _clip(values: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    margin = 0.01
    return np.clip(values, bounds[0] + margin, bounds[1] - margin)


def synthetic_rides(
    start: datetime = DEFAULT_START, days: float | None = 2.0, rides_per_day: int = 500_000, seed: int = 1
) -> Iterator[Ride]:
    """Rides in event-time (dropoff) order from `start` (to the second) for `days` days (None: without end)."""
    for chunk in synthetic_chunks(start, days, rides_per_day, seed):
        yield from chunk.rides()


def synthetic_encoded(
    start: datetime = DEFAULT_START, days: float | None = 2.0, rides_per_day: int = 500_000, seed: int = 1
) -> Iterator[list[RideEncoder]]:
    """The same rides as `synthetic_rides`, ready to send: one list of encoders per generated hour (built in
    bulk, the replay's fast path)."""
    for chunk in synthetic_chunks(start, days, rides_per_day, seed):
        yield chunk.encoders()


def synthetic_chunks(
    start: datetime = DEFAULT_START, days: float | None = 2.0, rides_per_day: int = 500_000, seed: int = 1
) -> Iterator[RideColumns]:
    """The trace an hour (CHUNK_S) at a time, as columns, drawn with numpy."""
    rng = np.random.default_rng(seed)
    total_s = None if days is None else int(round(days * 86400))
    spec = {"kind": "taxi", "speed": 1, "duplication": 1, "rides_per_day": rides_per_day}
    seq = 0
    offset = 0
    medallions = [f"{v:032X}" for v in rng.integers(0, 2**63, size=13_000, dtype=np.int64)]
    origin = np.datetime64(start.replace(microsecond=0), "s")
    while total_s is None or offset < total_s:
        length = CHUNK_S if total_s is None else min(CHUNK_S, total_s - offset)
        spec["start_hour"] = (start.hour + start.minute / 60 + offset / 3600) % 24
        counts = rate_profile(spec, duration_s=length, seed=int(rng.integers(0, 2**31)))
        n = int(counts.sum())
        seconds = np.repeat(np.arange(length), counts.astype(int)) + offset
        trip_s = np.clip(rng.gamma(2.0, 330.0, n), 60, 7200).astype(int)
        miles = np.round(trip_s / 3600.0 * 11.0 * rng.uniform(0.6, 1.4, n), 2)
        plon = _clip(rng.normal(_CENTRE[0], _SPREAD[0], n), NYC_LON)
        plat = _clip(rng.normal(_CENTRE[1], _SPREAD[1], n), NYC_LAT)
        angle = rng.uniform(0, 2 * np.pi, n)
        dlon = _clip(plon + miles * np.cos(angle) / _MILES_PER_DEG[0], NYC_LON)
        dlat = _clip(plat + miles * np.sin(angle) / _MILES_PER_DEG[1], NYC_LAT)
        taxi = rng.integers(0, len(medallions), n).tolist()
        dropoff = origin + seconds.astype("timedelta64[s]")
        yield RideColumns(
            ride_id=[f"s{i}" for i in range(seq + 1, seq + n + 1)],
            medallion=[medallions[cab] for cab in taxi],
            pickup_time=dropoff - trip_s.astype("timedelta64[s]"),
            dropoff_time=dropoff,
            trip_time_s=trip_s.tolist(),
            distance_mi=miles.tolist(),
            pickup_lon=np.round(plon, 6).tolist(),
            pickup_lat=np.round(plat, 6).tolist(),
            dropoff_lon=np.round(dlon, 6).tolist(),
            dropoff_lat=np.round(dlat, 6).tolist(),
        )
        seq += n
        offset += length
