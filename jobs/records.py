"""The job's record logic in plain Python: validate a ride's JSON, find its nearest landmark, build the output.

`parse`/`split_rides` run in the Kafka source's tasks (`jobs/kafka_source.py`), which hand the good records to
the query as typed columns (`RIDES_SCHEMA`) and dead-letter the bad ones; `enrich` runs in the nearest-landmark
query's `mapInArrow` (`jobs/queries/nearest_landmark.py`). msgspec decodes and type-checks a record in one C
pass into a struct of the known fields, and the enriched output is the validated input text with the two new
fields spliced in before its closing brace: it is never re-serialised.

A record is good when its value is a JSON object whose known fields (`FIELD_TYPES`) have the producer's types
(null counts as absent, a double field takes an integer too, a long must fit Spark's long, unknown fields are
kept as they are), the `REQUIRED` fields are present, `event_time` is `YYYY-MM-DDTHH:MM:SS`, and the pickup
point is a finite longitude/latitude. Anything else raises `BadRecord` with a reason; the writer sends it to the
dead-letter topic.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

import msgspec
import pyarrow as pa

from jobs.landmarks import LANDMARKS

FIELD_TYPES: dict[str, type] = {
    "key": str,
    "ride_id": str,
    "dup": int,
    "event_time": str,
    "pickup_time": str,
    "dropoff_time": str,
    "pickup_lon": float,
    "pickup_lat": float,
    "dropoff_lon": float,
    "dropoff_lat": float,
    "trip_time_s": int,
    "distance_mi": float,
    "medallion": str,
}
REQUIRED = ("key", "ride_id", "event_time", "pickup_lon", "pickup_lat")
ADDED = ("nearest_landmark", "landmark_distance")

EMPTY = "empty value"
NOT_AN_OBJECT = "not a JSON object with the expected field types"
BAD_EVENT_TIME = "event_time is not YYYY-MM-DDTHH:MM:SS"
BAD_POINT = "pickup point is not a longitude/latitude"
REASONS = (EMPTY, NOT_AN_OBJECT, *(f"missing field {f}" for f in REQUIRED), BAD_EVENT_TIME, BAD_POINT)

_LONG = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]  # Spark's long
# The decoded record: every known field optional (null or absent → None); the added fields only to notice them.
Ride = msgspec.defstruct(
    "Ride",
    [(f, (_LONG if kind is int else kind) | None, None) for f, kind in FIELD_TYPES.items()]
    + [(f, Any, msgspec.UNSET) for f in ADDED],
    gc=False,
)
_DECODER = msgspec.json.Decoder(Ride)
_POINTS = tuple((lm.name, lm.lon, lm.lat) for lm in LANDMARKS)
# what a good record's value gets before its closing brace, per landmark (the distance follows)
_SPLICE = {lm.name: f', "{ADDED[0]}": "{lm.name}", "{ADDED[1]}": '.encode() for lm in LANDMARKS}
_ARROW_TYPES = {str: pa.string(), int: pa.int64(), float: pa.float64()}


class BadRecord(ValueError):
    """A record the job cannot enrich; `reason` is one of `REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _valid_time(text: str) -> bool:
    """`YYYY-MM-DDTHH:MM:SS` and a real date and time (month 13 or February 30 fail)."""
    # with the separators in place, fromisoformat only accepts digits in the other 14 positions
    if len(text) != 19 or text[4:17:3] != "--T::":
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def parse(value: bytes | None) -> Any:
    """The validated record (a `Ride`) of one Kafka value; `BadRecord` with the first failing check's reason."""
    if not value:
        raise BadRecord(EMPTY)
    try:
        rec = _DECODER.decode(value)
    except msgspec.DecodeError:  # not JSON, not an object, or a field of the wrong type
        raise BadRecord(NOT_AN_OBJECT) from None
    for name in REQUIRED:
        if getattr(rec, name) is None:
            raise BadRecord(f"missing field {name}")
    if not _valid_time(rec.event_time):
        raise BadRecord(BAD_EVENT_TIME)
    if not (abs(rec.pickup_lon) <= 180 and abs(rec.pickup_lat) <= 90):
        raise BadRecord(BAD_POINT)
    return rec


def nearest(lon: float, lat: float) -> tuple[str, float]:
    """(name, distance) of the landmark nearest to (lon, lat), Euclidean in degrees; a tie goes to the first."""
    best_name, best = "", math.inf
    for name, x, y in _POINTS:
        dx, dy = lon - x, lat - y
        d = math.sqrt(dx * dx + dy * dy)
        if d < best:
            best_name, best = name, d
    return best_name, best


def enrich(value: bytes) -> tuple[bytes, bytes]:
    """(output key, output value) of a good record: keyed by its `key`, the value being the input JSON object with
    `nearest_landmark` and `landmark_distance` added. Raises `BadRecord` for a bad one."""
    rec = parse(value)
    name, dist = nearest(rec.pickup_lon, rec.pickup_lat)
    key = rec.key.encode()
    if rec.nearest_landmark is not msgspec.UNSET or rec.landmark_distance is not msgspec.UNSET:
        # never from the producer: re-serialise rather than repeat a key
        return key, msgspec.json.encode({**msgspec.json.decode(value), ADDED[0]: name, ADDED[1]: dist})
    body = value.rstrip()  # a JSON object: ends with "}" once trailing whitespace is gone
    return key, b"".join((body[:-1], _SPLICE[name], msgspec.json.encode(dist), b"}"))


# The parsed rides a query gets (jobs/query.py): where each record was read, its known fields typed (None when
# absent), and its JSON text as received (unknown fields included).
RIDES_SCHEMA = ", ".join(["partition int", "offset long"]
                         + [f"{f} {'string' if k is str else 'long' if k is int else 'double'}"
                            for f, k in FIELD_TYPES.items()] + ["value binary"])
_RIDES_ARROW = pa.schema([("partition", pa.int32()), ("offset", pa.int64())]
                         + [(f, _ARROW_TYPES[k]) for f, k in FIELD_TYPES.items()] + [("value", pa.binary())])


BadRow = tuple[int, str, bytes | None]  # (offset, reason, value) of a bad record


def split_rides(partition: int, offsets: list[int], values: list[bytes | None]) -> tuple[Any, list[BadRow]]:
    """Parse one chunk of a partition's records: (Arrow batch of the good ones as `RIDES_SCHEMA` rows, [(offset,
    reason, value)] of the bad ones)."""
    columns: dict[str, list[Any]] = {f: [] for f in FIELD_TYPES}
    good_offsets: list[int] = []
    good_values: list[bytes] = []
    bad: list[BadRow] = []
    for offset, value in zip(offsets, values, strict=True):
        try:
            rec = parse(value)
        except BadRecord as err:
            bad.append((offset, err.reason, value))
            continue
        good_offsets.append(offset)
        good_values.append(value)  # type: ignore[arg-type] - parse() rejects None
        for f, col in columns.items():
            col.append(getattr(rec, f))
    arrays = [pa.array([partition] * len(good_offsets), pa.int32()), pa.array(good_offsets, pa.int64())]
    arrays += [pa.array(columns[f], _ARROW_TYPES[k]) for f, k in FIELD_TYPES.items()]
    arrays.append(pa.array(good_values, pa.binary()))
    return pa.RecordBatch.from_arrays(arrays, schema=_RIDES_ARROW), bad


def dead_letter(reason: str, topic: str, partition: int, offset: int, value: bytes | None) -> tuple[bytes, bytes]:
    """(key, value) of a dead letter: keyed `topic/partition/offset` (unique), the raw text kept for inspection."""
    raw = value.decode("utf-8", "replace") if value is not None else ""
    body = {"reason": reason, "topic": topic, "partition": partition, "offset": offset, "raw": raw}
    return f"{topic}/{partition}/{offset}".encode(), msgspec.json.encode(body)
