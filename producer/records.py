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
        """The time the replay schedules this ride at: its dropoff (RideEncoder relies on this)."""
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


def _json_str(text: str) -> str:
    """`json.dumps(text)`, skipping the general escaper for the common plain ASCII alphanumeric ids."""
    return f'"{text}"' if text.isascii() and text.isalnum() else json.dumps(text)


class RideEncoder:
    """Encodes the `duplication` copies of a ride; the JSON body is built once per ride, not once per copy.

    Produces exactly `json.dumps(record_dict(ride, dup))`, byte for byte (a test checks it).
    """

    __slots__ = ("_body", "_head", "key_bytes")

    def __init__(self, ride: Ride) -> None:
        # Field order is fixed: "key", "ride_id", "dup", then the ride's own fields (the shared body). Floats and
        # ints print as json.dumps prints them (repr); strings go through json.dumps unless plainly alphanumeric.
        rid = _json_str(ride.ride_id)
        dropoff = format_time(ride.dropoff_time)
        self._head = ('{"key": ' + rid[:-1] + "-", '", "ride_id": ' + rid + ', "dup": ')
        self._body = (
            f', "event_time": "{dropoff}", "pickup_time": "{format_time(ride.pickup_time)}", '
            f'"dropoff_time": "{dropoff}", "pickup_lon": {ride.pickup_lon!r}, '
            f'"pickup_lat": {ride.pickup_lat!r}, "dropoff_lon": {ride.dropoff_lon!r}, '
            f'"dropoff_lat": {ride.dropoff_lat!r}, "trip_time_s": {ride.trip_time_s}, '
            f'"distance_mi": {ride.distance_mi!r}, "medallion": {_json_str(ride.medallion)}}}'
        )
        self.key_bytes = ride.ride_id.encode()

    def value(self, dup: int) -> bytes:
        """The UTF-8 JSON of copy `dup`."""
        head = self._head
        return f"{head[0]}{dup}{head[1]}{dup}{self._body}".encode()


def encode_record(ride: Ride, dup: int) -> tuple[bytes, bytes]:
    """(Kafka message key, value) of copy `dup`: the ride id as bytes and the record as UTF-8 JSON."""
    return ride.ride_id.encode(), json.dumps(record_dict(ride, dup)).encode()


def decode_record(value: bytes | str) -> dict[str, Any]:
    """Parse a record's JSON and check it has exactly RECORD_FIELDS (ValueError otherwise)."""
    record = json.loads(value)
    if not isinstance(record, dict) or set(record) != set(RECORD_FIELDS):
        raise ValueError(f"not a gesscale ride record: {str(value)[:80]}")
    return record
