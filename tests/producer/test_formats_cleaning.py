"""Taxi file formats (DEBS 2015, trip_data; plain, gzip; header with and without spaces) and cleaning rules."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from gesscale.errors import UserError
from producer.cleaning import ColumnMap, parse_ride
from producer.formats import DEBS_COLUMNS, TRIP_DATA_COLUMNS, detect, rows
from producer.source import file_source

# The three published example rows of trip_data_1.csv (shared/data/README.md).
TRIP_ROWS = [
    "89D227B655E5C82AECF13C3F540D4CF4,BA96DE419E711691B9445D6A6307C170,CMT,1,N,2013-01-01 15:11:48,"
    "2013-01-01 15:18:10,4,382,1.00,-73.978165,40.757977,-73.989838,40.751171",
    "0BD7C8F5BA12B88E0B67BED28BEA73D8,9FD8F69F0804BDB5549F40E9DA1BE472,CMT,1,N,2013-01-06 00:18:35,"
    "2013-01-06 00:22:54,1,259,1.50,-74.006683,40.731781,-73.994499,40.75066",
    "0BD7C8F5BA12B88E0B67BED28BEA73D8,9FD8F69F0804BDB5549F40E9DA1BE472,CMT,1,N,2013-01-05 18:49:41,"
    "2013-01-05 18:54:23,1,282,1.10,-74.004707,40.73777,-74.009834,40.726002",
]
DEBS_ROW = (
    "07290D3599E7A0D62097A346EFCC1FB5,E7750A37CAB07D0DFF0AF7E3573AC141,2013-01-01 00:00:00,2013-01-01 00:02:00,"
    "120,0.44,-73.956528,40.716976,-73.962440,40.715008,CSH,3.50,0.50,0.50,0.00,0.00,4.50"
)
DEBS_MAP = ColumnMap.from_names(list(DEBS_COLUMNS))


def _write(path: Path, lines: list[str], gz: bool = False) -> Path:
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("sep", [",", ", "], ids=["header-no-spaces", "header-with-spaces"])
def test_trip_data_with_header(tmp_path: Path, gz: bool, sep: str) -> None:
    path = _write(tmp_path / "trip_data_1.csv.x", [sep.join(TRIP_DATA_COLUMNS), *TRIP_ROWS], gz)
    source = file_source(path)
    rides = list(source)
    assert "trip_data" in source.description and ("gzip" in source.description) == gz
    assert [r.ride_id for r in rides] == ["2", "3", "4"]  # line numbers, header is line 1
    assert rides[0].trip_time_s == 382 and rides[0].pickup_lon == -73.978165 and rides[1].distance_mi == 1.5
    assert source.read == 3 and sum(source.skipped.values()) == 0


def test_headerless_trip_data_and_debs(tmp_path: Path) -> None:
    assert detect(_write(tmp_path / "a.csv", TRIP_ROWS)).fmt == "trip_data"
    debs = detect(_write(tmp_path / "b.csv", [DEBS_ROW]))
    assert debs.fmt == "debs" and not debs.has_header


def test_debs_row_becomes_a_ride() -> None:
    ride = parse_ride(DEBS_ROW.split(","), DEBS_MAP, "1")
    assert not isinstance(ride, str)
    assert ride.medallion == "07290D3599E7A0D62097A346EFCC1FB5" and ride.trip_time_s == 120
    assert ride.event_time == ride.dropoff_time


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        (6, "0.000000", "zero_coordinates"),
        (9, "0", "zero_coordinates"),
        (6, "-0.028333", "outside_nyc"),
        (7, "41.9", "outside_nyc"),
        (4, "0", "non_positive_duration"),
        (4, "-60", "non_positive_duration"),
        (3, "2012-12-31 23:59:00", "non_positive_duration"),
        (5, "abc", "unparsable"),
        (2, "yesterday", "unparsable"),
    ],
)
def test_cleaning_reasons(column: int, value: str, reason: str) -> None:
    fields = DEBS_ROW.split(",")
    fields[column] = value
    assert parse_ride(fields, DEBS_MAP, "1") == reason


def test_short_row_is_unparsable() -> None:
    assert parse_ride(DEBS_ROW.split(",")[:10], DEBS_MAP, "1") == "unparsable"


def test_bad_rows_are_counted_not_fatal(tmp_path: Path) -> None:
    path = _write(tmp_path / "mixed.csv", [DEBS_ROW, "garbage", DEBS_ROW.replace("-73.956528", "0"), DEBS_ROW])
    source = file_source(path)
    assert [r.ride_id for r in source] == ["1", "4"]
    assert source.skipped["unparsable"] == 1 and source.skipped["zero_coordinates"] == 1 and source.read == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"a,b,c\n1,2,3\n", "not a DEBS 2015"),
        (b"medallion,foo\n", "header lacks column"),
    ],
)
def test_bad_format_is_a_user_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        detect(path)


def test_unreadable_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        detect(tmp_path / "missing.csv")
    with pytest.raises(UserError, match="directory"):
        detect(tmp_path)
    broken = tmp_path / "broken.csv.gz"
    lines = [f"{os.urandom(16).hex().upper()}{DEBS_ROW[32:]}" for _ in range(2000)]
    packed = gzip.compress("\n".join(lines).encode())
    broken.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(UserError, match="unreadable after line"):
        list(rows(detect(broken)))


def test_forced_format_must_match(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.csv", [",".join(TRIP_DATA_COLUMNS), *TRIP_ROWS])
    with pytest.raises(UserError, match="header says trip_data"):
        detect(path, "debs")
