"""Read the two 2013 NYC taxi file formats, plain or gzip, and yield their rows with line numbers.

- DEBS 2015 Grand Challenge `sorted_data.csv`: no header, 17 columns, sorted by dropoff time.
- FOIL `trip_data_N.csv` (the Gesscale paper's input): 14 columns with a header line, whose names carry a space
  after each comma in the original files; a header-less 14-column file is read with the standard order.

The format is recognised from the first line (`auto`), or forced. Gzip is recognised by its magic bytes, not
the file name. Anything unreadable or unrecognisable is a UserError naming the file.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gesscale.errors import UserError
from producer.cleaning import ColumnMap

DEBS_COLUMNS = (
    "medallion", "hack_license", "pickup_datetime", "dropoff_datetime", "trip_time_in_secs", "trip_distance",
    "pickup_longitude", "pickup_latitude", "dropoff_longitude", "dropoff_latitude", "payment_type",
    "fare_amount", "surcharge", "mta_tax", "tip_amount", "tolls_amount", "total_amount",
)  # fmt: skip
TRIP_DATA_COLUMNS = (
    "medallion", "hack_license", "vendor_id", "rate_code", "store_and_fwd_flag", "pickup_datetime",
    "dropoff_datetime", "passenger_count", "trip_time_in_secs", "trip_distance", "pickup_longitude",
    "pickup_latitude", "dropoff_longitude", "dropoff_latitude",
)  # fmt: skip
FORMATS = ("auto", "debs", "trip_data")


@dataclass(frozen=True)
class TaxiFile:
    """A recognised taxi file: its format, column map and whether line 1 is a header."""

    path: Path
    fmt: str
    columns: ColumnMap
    has_header: bool
    gzipped: bool


def _open_text(path: Path, gzipped: bool) -> io.TextIOBase:
    if gzipped:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace", newline="")
    return path.open("r", encoding="utf-8", errors="replace", newline="")


def _is_gzip(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except FileNotFoundError:
        raise UserError(f"taxi file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"taxi file is a directory: {path}") from None
    except OSError as err:
        raise UserError(f"cannot read taxi file {path}: {err.strerror}") from None


def _first_row(path: Path, gzipped: bool) -> list[str]:
    try:
        with _open_text(path, gzipped) as fh:
            return next(csv.reader(fh), [])
    except (OSError, EOFError, zlib.error, csv.Error) as err:
        raise UserError(f"cannot read taxi file {path}: {err}") from None


def detect(path: Path, fmt: str = "auto") -> TaxiFile:
    """Recognise the format of `path` from its first line (or check it against the forced `fmt`)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown file format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = Path(path)
    gzipped = _is_gzip(path)
    first = _first_row(path, gzipped)
    if not first:
        raise UserError(f"{path}: empty file")
    names = [c.strip().lower() for c in first]
    if "medallion" in names:  # a header line: trip_data (or a DEBS file someone gave a header)
        try:
            columns = ColumnMap.from_names(first)
        except KeyError as err:
            raise UserError(f"{path}: header lacks column(s) {err.args[0]}") from None
        found = "trip_data" if len(names) == len(TRIP_DATA_COLUMNS) else "debs"
        if fmt not in ("auto", found):
            raise UserError(f"{path}: header says {found} format, not {fmt}")
        return TaxiFile(path, found, columns, True, gzipped)
    by_width = {len(DEBS_COLUMNS): "debs", len(TRIP_DATA_COLUMNS): "trip_data"}
    found = by_width.get(len(first))
    if fmt != "auto":
        found = fmt
    if found is None:
        raise UserError(
            f"{path}: not a DEBS 2015 (17 columns) or trip_data (14 columns) taxi file: "
            f"first line has {len(first)} column(s): {','.join(first)[:60]!r}"
        )
    names_for = DEBS_COLUMNS if found == "debs" else TRIP_DATA_COLUMNS
    if len(first) != len(names_for):
        raise UserError(f"{path}: {found} rows have {len(names_for)} columns, the first line has {len(first)}")
    return TaxiFile(path, found, ColumnMap.from_names(list(names_for)), False, gzipped)


def rows(taxi: TaxiFile) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) for every data row; a row the CSV reader rejects comes back with no fields (so it
    counts as unparsable); a file that breaks mid-way (truncated gzip) is a UserError naming the line.
    """
    reader = None
    try:
        with _open_text(taxi.path, taxi.gzipped) as fh:
            reader = csv.reader(fh)
            if taxi.has_header:
                next(reader, None)
            while True:
                try:
                    fields = next(reader)
                except StopIteration:
                    return
                except csv.Error:
                    yield reader.line_num, []
                    continue
                if fields:
                    yield reader.line_num, fields
    except (OSError, EOFError, zlib.error) as err:
        line = reader.line_num if reader is not None else 0
        raise UserError(f"{taxi.path}: unreadable after line {line}: {err}") from None
