"""The record format the Spark job parses: exact field names, unique keys, fast encoder equals plain JSON."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest

from producer.records import RECORD_FIELDS, Ride, RideColumns, RideEncoder, decode_record, encode_record, record_dict

RIDE = Ride(
    ride_id="42",
    medallion="07290D3599E7A0D62097A346EFCC1FB5",
    pickup_time=datetime(2013, 1, 1, 0, 0, 0),
    dropoff_time=datetime(2013, 1, 1, 0, 2, 0),
    trip_time_s=120,
    distance_mi=0.44,
    pickup_lon=-73.956528,
    pickup_lat=40.716976,
    dropoff_lon=-73.96244,
    dropoff_lat=40.715008,
)


def test_record_has_exactly_the_contract_fields() -> None:
    record = record_dict(RIDE, 2)
    assert tuple(record) == RECORD_FIELDS
    assert record["key"] == "42-2" and record["ride_id"] == "42" and record["dup"] == 2
    assert record["event_time"] == "2013-01-01T00:02:00"
    assert record["pickup_time"] == "2013-01-01T00:00:00"
    assert isinstance(record["trip_time_s"], int) and isinstance(record["pickup_lon"], float)


def test_kafka_key_is_ride_id_and_value_is_utf8_json() -> None:
    key, value = encode_record(RIDE, 1)
    assert key == b"42"
    assert json.loads(value.decode("utf-8"))["key"] == "42-1"


@pytest.mark.parametrize("ride_id", ["42", 'r-\u00e9"7', "a%d%%s"])
def test_fast_encoder_is_byte_identical(ride_id: str) -> None:
    ride = Ride(**{**{f: getattr(RIDE, f) for f in RIDE.__slots__}, "ride_id": ride_id})
    encoder = RideEncoder(ride)
    for dup in range(4):
        assert encoder.value(dup) == encode_record(ride, dup)[1]
    assert encoder.key_bytes == ride_id.encode()


def test_keys_are_unique_across_copies() -> None:
    encoder = RideEncoder(RIDE)
    keys = {decode_record(encoder.value(d))["key"] for d in range(10)}
    assert len(keys) == 10


def test_decode_rejects_foreign_json() -> None:
    with pytest.raises(ValueError):
        decode_record(b'{"key": "x"}')


def test_key_partition_matches_kafka_python_default_partitioner() -> None:
    from kafka.partitioner.default import DefaultPartitioner

    from producer.keyhash import key_partition

    class Cluster:
        def topics(self):
            return {"t"}

        def partitions_for_topic(self, topic):
            return {0, 1, 2, 3, 4, 5, 6}

        def available_partitions_for_topic(self, topic):
            return {0, 1, 2, 3, 4, 5, 6}

    default = DefaultPartitioner()
    for ride_id in ["1", "42", "s123456", "\u00e9t\u00e9-9", "0" * 40]:
        key = ride_id.encode()
        assert key_partition(key, list(range(7))) == default.partition("t", None, key, None, None, Cluster())


def test_record_id_reads_the_unique_key_back() -> None:
    from producer.verify import record_id

    assert record_id(RideEncoder(RIDE).value(2)) == b"42-2"
    odd = Ride(**{**{f: getattr(RIDE, f) for f in RIDE.__slots__}, "ride_id": 'a"b'})
    assert record_id(RideEncoder(odd).value(0)) == b'a\\"b-0'
    assert record_id(b'{"other": 1}') is None


def test_bulk_key_hashes_equal_kafka_pythons_murmur2() -> None:
    from kafka.partitioner.default import murmur2

    from producer.keyhash import key_hash, key_hashes

    rng = np.random.default_rng(5)
    odd = [bytes(rng.integers(0, 256, size=int(n), dtype=np.uint8)) for n in rng.integers(0, 40, size=2000)]
    for keys in ([f"s{i}".encode() for i in range(1, 20_000, 7)], odd, [b""], []):
        expected = [murmur2(k) & 0x7FFFFFFF for k in keys]
        assert key_hashes(keys) == expected
        assert [key_hash(k) for k in keys] == expected


def _columns(ride_ids: list[str], medallions: list[str]) -> RideColumns:
    n = len(ride_ids)
    rng = np.random.default_rng(11)
    dropoff = np.datetime64("2013-05-01T00:00:00", "s") + rng.integers(0, 86_400, n).astype("timedelta64[s]")
    trip = rng.integers(1, 7200, n)
    return RideColumns(
        ride_id=ride_ids,
        medallion=medallions,
        pickup_time=dropoff - trip.astype("timedelta64[s]"),
        dropoff_time=dropoff,
        trip_time_s=trip.tolist(),
        distance_mi=np.round(rng.uniform(0.01, 30, n), 2).tolist(),
        pickup_lon=np.round(rng.uniform(-74.3, -73.6, n), 6).tolist(),
        pickup_lat=np.round(rng.uniform(40.45, 41.0, n), 6).tolist(),
        dropoff_lon=rng.uniform(-74.3, -73.6, n).tolist(),  # unrounded floats print as json.dumps prints them too
        dropoff_lat=[40.5, 41.0, 40.75, 40.000001][:n] + rng.uniform(40.45, 41.0, max(0, n - 4)).tolist(),
    )


@pytest.mark.parametrize(
    "ride_ids, medallions",
    [
        ([f"s{i}" for i in range(1, 3001)], ["07290D3599E7A0D62097A346EFCC1FB5"] * 3000),
        (["42", 'r-\u00e9"7', "a%d%%s", "x y", "s5"], ["M%s", "plain", 'q"', "\u00e9", "Z9"]),
    ],
)
def test_bulk_encoders_are_byte_identical_to_json_dumps(ride_ids: list[str], medallions: list[str]) -> None:
    from producer.keyhash import key_hash

    columns = _columns(ride_ids, medallions)
    rides, encoders = columns.rides(), columns.encoders()
    assert len(rides) == len(encoders) == len(ride_ids)
    for ride, enc in zip(rides, encoders, strict=True):
        for dup in (0, 1, 2, 13):
            assert enc.value(dup) == encode_record(ride, dup)[1] == RideEncoder(ride).value(dup)
        assert enc.key_bytes == ride.ride_id.encode()
        assert enc.key_hash == key_hash(enc.key_bytes)
        assert enc.event_time == ride.event_time == ride.dropoff_time
