"""The record format on the wire (pure, no I/O): one taxi ride, sent `duplication` times.

Each message is a JSON object (UTF-8) with exactly these fields; the Spark job parses them by name:

    key           "<ride_id>-<dup>", unique per record (proves nothing was lost or duplicated)
    ride_id       str, unique per ride within one replay (also the Kafka message key, as bytes)
    dup           int, 0 .. duplication-1
    event_time    "YYYY-MM-DDTHH:MM:SS", the trace time the replay follows (the ride's dropoff: a ride is
                  reported when it ends, and the DEBS 2015 file is sorted by it)
    pickup_time   "YYYY-MM-DDTHH:MM:SS"
    dropoff_time  "YYYY-MM-DDTHH:MM:SS"
    pickup_lon, pickup_lat, dropoff_lon, dropoff_lat   float, degrees
    trip_time_s   int, seconds
    distance_mi   float, miles
    medallion     str, the taxi's id
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

RECORD_FIELDS: tuple[str, ...] = (
    "key", "ride_id", "dup", "event_time", "pickup_time", "dropoff_time", "pickup_lon", "pickup_lat",
    "dropoff_lon", "dropoff_lat", "trip_time_s", "distance_mi", "medallion",
)  # fmt: skip
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


def format_time(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS` (seconds precision, no zone), the one time format of the records."""
    return moment.strftime(TIME_FORMAT) if moment.microsecond else moment.isoformat()


@dataclass(frozen=True, slots=True)
class Ride:
    """One cleaned taxi ride, whatever file format (or generator) it came from."""

    ride_id: str
    medallion: str
    pickup_time: datetime
    dropoff_time: datetime
    trip_time_s: int
    distance_mi: float
    pickup_lon: float
    pickup_lat: float
    dropoff_lon: float
    dropoff_lat: float

    @property
    def event_time(self) -> datetime:
        """The time the replay schedules this ride at: its dropoff."""
        return self.dropoff_time


def record_dict(ride: Ride, dup: int) -> dict[str, Any]:
    """The record of duplicate `dup` of `ride` as a dict with exactly RECORD_FIELDS."""
    return {
        "key": f"{ride.ride_id}-{dup}",
        "ride_id": ride.ride_id,
        "dup": dup,
        "event_time": format_time(ride.event_time),
        "pickup_time": format_time(ride.pickup_time),
        "dropoff_time": format_time(ride.dropoff_time),
        "pickup_lon": ride.pickup_lon,
        "pickup_lat": ride.pickup_lat,
        "dropoff_lon": ride.dropoff_lon,
        "dropoff_lat": ride.dropoff_lat,
        "trip_time_s": ride.trip_time_s,
        "distance_mi": ride.distance_mi,
        "medallion": ride.medallion,
    }


class RideEncoder:
    """Encodes the `duplication` copies of a ride; the JSON body is built once per ride, not once per copy.

    Produces exactly `json.dumps(record_dict(ride, dup))`, byte for byte (a test checks it).
    """

    __slots__ = ("_body", "_mid", "_ride_id", "key_bytes")

    def __init__(self, ride: Ride) -> None:
        text = json.dumps(record_dict(ride, 0))
        # Field order is fixed: "key", "ride_id", "dup", then the ride's own fields (the shared body).
        self._ride_id = ride.ride_id
        self._mid = f', "ride_id": {json.dumps(ride.ride_id)}, "dup": '
        self._body = text[text.index(', "event_time"') :]
        self.key_bytes = ride.ride_id.encode()

    def value(self, dup: int) -> bytes:
        """The UTF-8 JSON of copy `dup`."""
        return f'{{"key": {json.dumps(f"{self._ride_id}-{dup}")}{self._mid}{dup}{self._body}'.encode()


def encode_record(ride: Ride, dup: int) -> tuple[bytes, bytes]:
    """(Kafka message key, value) of copy `dup`: the ride id as bytes and the record as UTF-8 JSON."""
    return ride.ride_id.encode(), json.dumps(record_dict(ride, dup)).encode()


def decode_record(value: bytes | str) -> dict[str, Any]:
    """Parse a record's JSON and check it has exactly RECORD_FIELDS (ValueError otherwise)."""
    record = json.loads(value)
    if not isinstance(record, dict) or set(record) != set(RECORD_FIELDS):
        raise ValueError(f"not a gesscale ride record: {str(value)[:80]}")
    return record
