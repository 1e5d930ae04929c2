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

import numpy as np

from producer.keyhash import key_hash, key_hashes

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
    """`json.dumps(text)`, skipping the general escaper for plain ASCII alphanumeric text (ids, medallions)."""
    return f'"{text}"' if text.isascii() and text.isalnum() else json.dumps(text)


def _json_strs(texts: list[str]) -> list[str]:
    """`_json_str` of each text, %-escaped (`_template`); one check for a whole column of plain ids."""
    joined = "".join(texts)
    if joined.isascii() and joined.isalnum():
        return [f'"{text}"' for text in texts]
    return [_json_str(text).replace("%", "%%") for text in texts]


# A ride's record with the copy index left as %d (twice: in "key" and in "dup"), filled in by a %-format of the
# JSON-quoted ride id (its closing quote dropped for the key), the times and the ride's other fields. Numbers
# print as json.dumps prints them: str() of a float is its repr, of an int its digits.
_RECORD = (
    '{"key": %s-%%d", "ride_id": %s, "dup": %%d, "event_time": "%s", "pickup_time": "%s", "dropoff_time": "%s", '
    '"pickup_lon": %s, "pickup_lat": %s, "dropoff_lon": %s, "dropoff_lat": %s, "trip_time_s": %s, '
    '"distance_mi": %s, "medallion": %s}'
)


class RideEncoder:
    """Encodes the `duplication` copies of a ride; the JSON is built once per ride (a template with the copy
    index left open), not once per copy.

    Produces exactly `json.dumps(record_dict(ride, dup))`, byte for byte (a test checks it). `key_hash` (the
    murmur2 Kafka partitions by) is computed on first use, or given by `RideColumns.encoders` in bulk.
    """

    __slots__ = ("_hash", "_template", "event_time", "key_bytes")

    def __init__(self, ride: Ride) -> None:
        # Field order is fixed: "key", "ride_id", "dup", then the ride's own fields. Strings go through
        # json.dumps unless plainly alphanumeric, and have their % doubled for the template.
        rid, medallion = _json_strs([ride.ride_id, ride.medallion])
        dropoff = format_time(ride.dropoff_time)
        self._template = _RECORD % (
            rid[:-1], rid, dropoff, format_time(ride.pickup_time), dropoff, ride.pickup_lon, ride.pickup_lat,
            ride.dropoff_lon, ride.dropoff_lat, ride.trip_time_s, ride.distance_mi, medallion,
        )  # fmt: skip
        self.key_bytes = ride.ride_id.encode()
        self.event_time = ride.event_time
        self._hash: int | None = None

    @property
    def key_hash(self) -> int:
        """murmur2 of the key as Kafka's default partitioner computes it (see producer.keyhash)."""
        if self._hash is None:
            self._hash = key_hash(self.key_bytes)
        return self._hash

    def value(self, dup: int) -> bytes:
        """The UTF-8 JSON of copy `dup`."""
        return (self._template % (dup, dup)).encode()


_new = object.__new__


def _encoder(key: bytes, template: str, event_time: datetime, hashed: int) -> RideEncoder:
    """A RideEncoder from parts made in bulk (RideColumns.encoders), without going through a Ride."""
    enc = _new(RideEncoder)
    enc.key_bytes, enc._template, enc.event_time, enc._hash = key, template, event_time, hashed
    return enc


@dataclass
class RideColumns:
    """Rides as columns of equal length: how the synthetic trace is generated, so that it is encoded in bulk.

    `encoders()` gives the same bytes as `RideEncoder(ride)` for each of `rides()` (a test checks it) at a
    fraction of the cost per ride: times formatted and key hashes computed by numpy, one %-format per ride.
    """

    ride_id: list[str]
    medallion: list[str]
    pickup_time: np.ndarray  # datetime64[s]
    dropoff_time: np.ndarray  # datetime64[s]
    trip_time_s: list[int]
    distance_mi: list[float]
    pickup_lon: list[float]
    pickup_lat: list[float]
    dropoff_lon: list[float]
    dropoff_lat: list[float]

    def __len__(self) -> int:
        return len(self.ride_id)

    def rides(self) -> list[Ride]:
        """One Ride per row."""
        return [
            Ride(*row)
            for row in zip(
                self.ride_id, self.medallion, self.pickup_time.tolist(), self.dropoff_time.tolist(),
                self.trip_time_s, self.distance_mi, self.pickup_lon, self.pickup_lat, self.dropoff_lon,
                self.dropoff_lat, strict=True,
            )
        ]  # fmt: skip

    def encoders(self) -> list[RideEncoder]:
        """One RideEncoder per row, built in bulk."""
        ids = _json_strs(self.ride_id)
        keys = [r.encode() for r in self.ride_id]
        pickup = np.datetime_as_string(self.pickup_time, unit="s").tolist()
        dropoff = np.datetime_as_string(self.dropoff_time, unit="s").tolist()
        templates = [
            _RECORD % row
            for row in zip([rid[:-1] for rid in ids], ids, dropoff, pickup, dropoff, self.pickup_lon,
                           self.pickup_lat, self.dropoff_lon, self.dropoff_lat, self.trip_time_s,
                           self.distance_mi, _json_strs(self.medallion), strict=True)
        ]  # fmt: skip
        return list(map(_encoder, keys, templates, self.dropoff_time.tolist(), key_hashes(keys)))


def encode_record(ride: Ride, dup: int) -> tuple[bytes, bytes]:
    """(Kafka message key, value) of copy `dup`: the ride id as bytes and the record as UTF-8 JSON."""
    return ride.ride_id.encode(), json.dumps(record_dict(ride, dup)).encode()


def decode_record(value: bytes | str) -> dict[str, Any]:
    """Parse a record's JSON and check it has exactly RECORD_FIELDS (ValueError otherwise)."""
    record = json.loads(value)
    if not isinstance(record, dict) or set(record) != set(RECORD_FIELDS):
        raise ValueError(f"not a gesscale ride record: {str(value)[:80]}")
    return record
