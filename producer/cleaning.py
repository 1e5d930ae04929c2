"""Turn one CSV row of a taxi file into a Ride, or name the reason it is skipped (pure, no I/O).

Rules, checked in this order; a row is counted under the first rule it breaks:

    unparsable            wrong number of columns, a number or timestamp that does not parse (or is nan/inf)
    zero_coordinates      any of the four coordinates is exactly 0 (the GPS had no fix)
    outside_nyc           a coordinate outside the box lon [-74.3, -73.6], lat [40.45, 41.0] (NYC and its
                          airports, EWR included)
    non_positive_duration trip_time_in_secs <= 0, or the dropoff before the pickup
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from producer.records import Ride

SKIP_REASONS: tuple[str, ...] = ("unparsable", "zero_coordinates", "outside_nyc", "non_positive_duration")
NYC_LON = (-74.3, -73.6)
NYC_LAT = (40.45, 41.0)

# The columns a ride needs, by their names in the trip_data header (DEBS 2015 uses the same names, no header).
NEEDED = (
    "medallion", "pickup_datetime", "dropoff_datetime", "trip_time_in_secs", "trip_distance",
    "pickup_longitude", "pickup_latitude", "dropoff_longitude", "dropoff_latitude",
)  # fmt: skip


@dataclass(frozen=True)
class ColumnMap:
    """Where each needed column sits in a row, and how many columns a well-formed row has."""

    width: int
    index: dict[str, int]

    @classmethod
    def from_names(cls, names: list[str]) -> ColumnMap:
        """Map from header names (surrounding spaces ignored); KeyError names a missing column."""
        clean = [n.strip().lower() for n in names]
        missing = [n for n in NEEDED if n not in clean]
        if missing:
            raise KeyError(", ".join(missing))
        return cls(width=len(clean), index={n: clean.index(n) for n in NEEDED})


def _in_nyc(lon: float, lat: float) -> bool:
    return NYC_LON[0] <= lon <= NYC_LON[1] and NYC_LAT[0] <= lat <= NYC_LAT[1]


def parse_ride(fields: list[str], columns: ColumnMap, ride_id: str) -> Ride | str:
    """The Ride of this row, or the skip reason (one of SKIP_REASONS)."""
    if len(fields) != columns.width:
        return "unparsable"
    ix = columns.index
    try:
        pickup = datetime.fromisoformat(fields[ix["pickup_datetime"]].strip())
        dropoff = datetime.fromisoformat(fields[ix["dropoff_datetime"]].strip())
        trip_time = int(float(fields[ix["trip_time_in_secs"]]))
        distance = float(fields[ix["trip_distance"]])
        plon, plat = float(fields[ix["pickup_longitude"]]), float(fields[ix["pickup_latitude"]])
        dlon, dlat = float(fields[ix["dropoff_longitude"]]), float(fields[ix["dropoff_latitude"]])
    except ValueError:
        return "unparsable"
    if not all(math.isfinite(v) for v in (distance, plon, plat, dlon, dlat)):
        return "unparsable"
    if 0.0 in (plon, plat, dlon, dlat):
        return "zero_coordinates"
    if not (_in_nyc(plon, plat) and _in_nyc(dlon, dlat)):
        return "outside_nyc"
    if trip_time <= 0 or dropoff < pickup:
        return "non_positive_duration"
    return Ride(
        ride_id=ride_id,
        medallion=fields[ix["medallion"]].strip(),
        pickup_time=pickup,
        dropoff_time=dropoff,
        trip_time_s=trip_time,
        distance_mi=distance,
        pickup_lon=plon,
        pickup_lat=plat,
        dropoff_lon=dlon,
        dropoff_lat=dlat,
    )
