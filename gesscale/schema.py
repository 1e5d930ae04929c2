"""Strict checks for the values of a user's file: known keys only, finite numbers in range, whole counts.

Scenario files and workload specs are read with these helpers, so that every mistake is one `UserError` line
naming the file and the key: a misspelled key is refused rather than ignored (its default would silently stand
in), NaN and infinity are refused (they pass every `<` comparison unnoticed), and a count (replicas, seed) must
be a whole number rather than be truncated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gesscale.errors import UserError, brief

# A duration: a number of seconds, or a number with a unit (10s, 1.5m, 2min, 4h, 500ms, 1d).
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|min|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_text(text: str, where: str) -> float:
    """`10s`, `1.5m`, `2h`, `500ms`, `1d` or a bare number of seconds, in seconds; a `UserError` otherwise. The
    one parser of durations: controller options, policy options and a scenario's times (`duration_s: 4h`)."""
    m = _DURATION.match(str(text)[:100])
    if not m:
        raise UserError(f"{where}: {brief(text)} is not a duration like 10, 10s, 2m or 1h")
    return float(m.group(1)) * _UNITS[m.group(2)]


def check_keys(data: Mapping[Any, Any], allowed: Iterable[str], where: str) -> None:
    """Refuse a key of `data` that is not in `allowed`, naming the keys that are."""
    known = tuple(allowed)
    unknown = [str(k) for k in data if k not in known]
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(known)})")


def _bound(value: float, lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str | None:
    """The range `value` misses, written as an interval, or None when it is inside."""
    below = lo is not None and (value <= lo if lo_open else value < lo)
    above = hi is not None and (value >= hi if hi_open else value > hi)
    if not (below or above):
        return None
    if hi is None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if lo is None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def number(
    data: Mapping[str, Any],
    key: str,
    default: float | None,
    where: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    integer: bool = False,
    duration: bool = False,
) -> Any:
    """`data[key]` (or `default` when absent), checked: a finite number within [lo, hi] (open ends as asked).

    With `integer`, a whole number is required (`2.0` is taken as 2; `2.5` is an error) and an `int` returned.
    With `duration`, a text such as `4h` or `90s` is taken as seconds (`parse_duration_text`).
    """
    value = data.get(key, default)
    what = "a whole number" if integer else "a duration (10, 10s, 2m, 4h)" if duration else "a number"
    if duration and isinstance(value, str):
        value = parse_duration_text(value, f"{where}: '{key}'")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: '{key}' must be {what}, got {brief(value)}")
    if isinstance(value, int) and abs(value) > 10**18:
        raise UserError(f"{where}: '{key}' must be {_bound(math.inf, lo, hi, lo_open, hi_open) or what}, got a "
                        f"{len(str(abs(value)))}-digit number")
    if not math.isfinite(value):
        raise UserError(f"{where}: '{key}' must be finite, got {value}")
    if integer:
        if value != int(value):
            raise UserError(f"{where}: '{key}' must be {what}, got {value}")
        value = int(value)
    bad = _bound(float(value), lo, hi, lo_open, hi_open)
    if bad is not None:
        raise UserError(f"{where}: '{key}' must be {bad}, got {value:g}")
    return value
