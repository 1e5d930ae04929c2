"""The job's record logic (jobs/records.py, what the writer runs on every record): enrichment against a
pure-Python reference, the reasons of bad records, the dead-letter value, the Parquet rows."""

from __future__ import annotations

import json

import pytest

from jobs import records
from jobs.landmarks import LANDMARKS
from tests.jobs import ridegen
from tests.jobs.reference import check_enriched, reference_nearest


def test_enrichment_of_10000_records_equals_the_reference() -> None:
    recs = [json.loads(v) for _, v, _ in ridegen.values(10_000, seed=7)]
    for j, lm in enumerate(LANDMARKS):  # the landmarks themselves: distance 0 and the right name
        recs[j]["pickup_lon"], recs[j]["pickup_lat"] = lm.lon, lm.lat
    names = set()
    for rec in recs:
        key, value = records.enrich(json.dumps(rec).encode())
        names.add(check_enriched(rec, key, value))
    assert names == {lm.name for lm in LANDMARKS}
    assert json.loads(records.enrich(json.dumps(recs[0]).encode())[1])["landmark_distance"] == 0.0


def test_a_tie_goes_to_the_first_landmark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_POINTS", (("first", 1.0, 1.0), ("second", 1.0, 1.0), ("third", 9.0, 9.0)))
    assert records.nearest(4.0, 5.0) == ("first", 5.0)
    assert records.nearest(LANDMARKS[2].lon, LANDMARKS[2].lat)[0] == "first"


@pytest.mark.parametrize("value,reason", [
    (None, "empty value"),
    (b"", "empty value"),
    *[(v, r) for v, r in zip(ridegen.MALFORMED, [
        "not a JSON object", "not a JSON object", "not a JSON object", "missing field key", "not a JSON object",
        "event_time", "longitude/latitude"], strict=True)],
    (b'"a string"', "not a JSON object"),
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7,'
     b' "dup": true}', "not a JSON object"),  # a boolean is not a long
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7,'
     b' "dup": 9223372036854775808}', "not a JSON object"),  # past Spark's long
    (b'{"key": 7, "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7}',
     "not a JSON object"),
    (b'{"key": "k", "ride_id": null, "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 4}',
     "missing field ride_id"),
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-13-01T00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7}',
     "event_time"),
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-02-30T00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7}',
     "event_time"),
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01 00:00:00", "pickup_lon": -73.9, "pickup_lat": 40.7}',
     "event_time"),
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00.5", "pickup_lon": -73.9, "pickup_lat": 4}',
     "event_time"),
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": 1e400, "pickup_lat": 4}',
     "not a JSON object"),  # not a finite number
    (b'{"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -180.5, "pickup_lat": 4}',
     "longitude/latitude"),
])
def test_bad_records_carry_their_reason(value: bytes | None, reason: str) -> None:
    with pytest.raises(records.BadRecord) as err:
        records.enrich(value)
    assert reason in err.value.reason and err.value.reason in records.REASONS


def test_lenient_where_the_types_allow() -> None:
    rec = {"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -74, "pickup_lat": 41,
           "dup": None, "extra": {"kept": [1, 2]}}
    key, value = records.enrich(b"  " + json.dumps(rec, indent=2).encode() + b"\n ")
    check_enriched(rec, key, value)
    rides, bad = records.split_rides(3, [17], [json.dumps(rec).encode()])
    row = rides.to_pylist()[0]
    assert not bad and row["partition"] == 3 and row["offset"] == 17
    assert row["pickup_lon"] == -74.0 and type(row["pickup_lon"]) is float and row["dup"] is None


def test_a_record_that_already_has_the_new_fields_gets_them_once() -> None:
    rec = {"key": "k", "ride_id": "r", "event_time": "2013-05-01T00:00:00", "pickup_lon": -73.99, "pickup_lat": 40.7,
           "nearest_landmark": "stale"}
    _, value = records.enrich(json.dumps(rec).encode())
    assert value.count(b"nearest_landmark") == 1
    assert json.loads(value)["nearest_landmark"] == reference_nearest(-73.99, 40.7)[0]


def test_dead_letter_is_keyed_by_origin_and_keeps_the_raw_text() -> None:
    key, value = records.dead_letter("empty value", "rides", 3, 17, b"\xff{")
    assert key == b"rides/3/17"
    assert json.loads(value) == {"reason": "empty value", "topic": "rides", "partition": 3, "offset": 17,
                                 "raw": "\ufffd{"}


def test_split_rides_types_the_good_records_and_names_the_bad_ones() -> None:
    sent = list(ridegen.values(300, malformed_every=10))
    rides, bad = records.split_rides(1, list(range(100, 400)), [v for _, v, _ in sent])
    assert rides.num_rows == 270 and len(bad) == 30
    assert rides.schema.names == ["partition", "offset", *records.FIELD_TYPES, "value"]
    good = [(i, v) for i, (_, v, ok) in enumerate(sent) if ok]
    assert rides.column("offset").to_pylist() == [100 + i for i, _ in good]
    assert rides.column("value").to_pylist() == [v for _, v in good]
    first = json.loads(good[0][1])
    assert {k: rides.column(k)[0].as_py() for k in first} == first
    assert [o for o, _, _ in bad] == [100 + i for i, (_, _, ok) in enumerate(sent) if not ok]
    assert all(reason in records.REASONS and value == sent[o - 100][1] for o, reason, value in bad)
