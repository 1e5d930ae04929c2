"""The record format the Spark job parses: exact field names, unique keys, fast encoder equals plain JSON."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from producer.records import RECORD_FIELDS, Ride, RideEncoder, decode_record, encode_record, record_dict

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


@pytest.mark.parametrize("ride_id", ["42", "r-\u00e9\"7"])
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

    from producer.sinks import key_partition

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
