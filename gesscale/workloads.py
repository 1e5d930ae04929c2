"""Input-rate shapes (records/s for each second) shared by the simulator and the producer.

One definition serves both, so that a live run (`gesscale produce --pattern ...`) and a simulated run see the
same input shape. A workload spec is the `workload:` mapping of a scenario file (docs/scenarios.md).

Kinds and their keys (rates in records/s, times in s):
- `taxi`: speed (10), duplication (3), days (2), rides_per_day (500000), start_hour (0) — the NYC weekday
  hourly pickup shape replayed `speed` times faster, each ride sent `duplication` times, Poisson arrivals.
- `cosine`: mean, amplitude, period_s (3600), noise (relative, 0), duration_s.
- `random`: mean, spread, jump_prob (0.01), step (relative walk step, 0.02), duration_s — a bounded random walk
  with sudden jumps.
- `increasing` / `decreasing`: start, end, duration_s — a linear ramp.
- `spike`: base, peak, at_s, width_s, duration_s.
- `steps`: levels (list), step_s — each level held for step_s.
- `csv`: path (columns t_s,rate; the rate holds until the next row), duration_s (optional).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gesscale.errors import UserError, brief
from gesscale.schema import check_keys, number

# Approximate share (%) of a weekday's NYC yellow-taxi pickups by hour of day 0..23 (docs/scenarios.md).
_TAXI_HOURLY_PERCENT = (
    3.4, 2.4, 1.7, 1.2, 0.9, 0.9, 2.0, 3.5, 4.3, 4.3, 4.1, 4.3,
    4.5, 4.5, 4.7, 4.6, 4.0, 4.6, 5.8, 6.2, 5.8, 5.7, 5.6, 4.8,
)  # fmt: skip
TAXI_HOURLY_SHARE: tuple[float, ...] = tuple(p / sum(_TAXI_HOURLY_PERCENT) for p in _TAXI_HOURLY_PERCENT)

WORKLOAD_KINDS = ("taxi", "cosine", "random", "increasing", "decreasing", "spike", "steps", "csv")
# The keys each kind takes (besides `kind`); a scenario's workload with any other key is refused.
WORKLOAD_KEYS: dict[str, tuple[str, ...]] = {
    "taxi": ("speed", "duplication", "days", "rides_per_day", "start_hour"),
    "cosine": ("mean", "amplitude", "period_s", "noise", "duration_s"),
    "random": ("mean", "spread", "jump_prob", "step", "duration_s"),
    "increasing": ("start", "end", "duration_s"),
    "decreasing": ("start", "end", "duration_s"),
    "spike": ("base", "peak", "at_s", "width_s", "duration_s"),
    "steps": ("levels", "step_s"),
    "csv": ("path", "duration_s"),
}
# The longest workload (s): 30 days, far beyond any experiment, well within memory (a few arrays of floats per
# second); times of a rate CSV beyond it are refused.
MAX_WORKLOAD_S = 30 * 86400
MAX_CSV_TIME_S = float(MAX_WORKLOAD_S)
# The highest rate (records/s) a workload may ask for: a thousand times the busiest measured Spark operator.
MAX_RATE = 1e9
# Per key: (lower bound, lower bound open, upper bound, upper bound open, whole number). Keys not listed are
# rates in [0, MAX_RATE] (levels of a shape, `start`... may dip below zero: see `check_workload`). Relative noise
# and the random walk's relative step are fractions below 1; a probability per second is at most 1; a ride is sent
# a whole number of times; times (keys ending in `_s`, which also take `4h`, `90s`) are within MAX_WORKLOAD_S.
_RANGES: dict[str, tuple[float, bool, float | None, bool, bool]] = {
    "speed": (1e-3, False, 1e6, False, False),
    "duplication": (1.0, False, 1e6, False, True),
    "days": (0.0, True, 30.0, False, False),
    "rides_per_day": (1.0, False, 1e9, False, True),
    "start_hour": (0.0, False, 24.0, True, False),
    "period_s": (0.0, True, MAX_WORKLOAD_S, False, False),
    "noise": (0.0, False, 1.0, True, False),
    "step": (0.0, False, 1.0, True, False),
    "jump_prob": (0.0, False, 1.0, False, False),
    "at_s": (0.0, False, MAX_WORKLOAD_S, False, False),
    "width_s": (0.0, True, MAX_WORKLOAD_S, False, False),
    "step_s": (0.0, True, MAX_WORKLOAD_S, False, False),
    "duration_s": (0.0, True, MAX_WORKLOAD_S, False, False),
}


def workload_range(key: str) -> tuple[float, float, bool, bool]:
    """(lo, hi, lo_open, hi_open) of a workload number as `check_workload` holds it (a key not in `_RANGES` is a
    rate), for the flags that give the same quantity (`gesscale produce --speed`, `--days`, ...)."""
    lo, lo_open, hi, hi_open, _whole = _RANGES.get(key, (0.0, False, MAX_RATE, False, False))
    return lo, MAX_RATE if hi is None else hi, lo_open, hi_open


def check_workload(spec: Any, where: str) -> dict[str, Any]:
    """A scenario's `workload:` mapping, checked strictly: a known kind, only that kind's keys, every number
    finite and in its range (relative noise and walk step in [0, 1), whole duplication and rides per day).
    Returns a copy; problems are one `UserError` line starting with `where`."""
    if not isinstance(spec, Mapping) or spec.get("kind") not in WORKLOAD_KINDS:
        kind = spec.get("kind") if isinstance(spec, Mapping) else spec
        raise UserError(f"{where}: workload kind {brief(kind)} unknown; expected one of {', '.join(WORKLOAD_KINDS)}")
    kind = str(spec["kind"])
    check_keys(spec, ("kind", *WORKLOAD_KEYS[kind]), f"{where}: workload ({kind})")
    out = dict(spec)
    for key, value in spec.items():
        if value is None and key not in ("kind", "path", "levels"):
            del out[key]  # `key: null` leaves the key unset: its default, or the error of a required one
            continue
        if key in ("kind", "path", "levels"):
            continue
        lo, lo_open, hi, hi_open, whole = _RANGES.get(key, (0.0, False, MAX_RATE, False, False))
        if key in ("start", "end", "mean", "amplitude", "base", "peak"):
            lo, lo_open = -MAX_RATE, False  # a shape's level may dip below zero (rates are clipped at 0)
        out[key] = number(spec, key, None, f"{where}: workload ({kind})", lo=lo, hi=hi, lo_open=lo_open,
                          hi_open=hi_open, integer=whole, duration=key.endswith("_s"))  # fmt: skip
    if kind == "steps":
        levels = spec.get("levels")
        if not isinstance(levels, list) or not levels:
            raise UserError(f"{where}: workload (steps): 'levels' must be a non-empty list of rates")
        for i, level in enumerate(levels):
            number({f"levels[{i}]": level}, f"levels[{i}]", None, f"{where}: workload (steps)", lo=0.0,
                   hi=MAX_RATE)
    if kind == "csv" and not isinstance(spec.get("path"), str):
        raise UserError(f"{where}: workload (csv): 'path' must be the file name of a rate CSV")
    if kind not in ("taxi", "steps", "csv") and out.get("duration_s") is None:
        raise UserError(f"{where}: workload ({kind}) needs 'duration_s' (how long it lasts, e.g. 3600 or 1h)")
    if kind != "csv" or out.get("duration_s") is not None:  # a CSV's own length is known once read
        length = workload_duration_s(out)
        if length > MAX_WORKLOAD_S:
            raise UserError(f"{where}: workload ({kind}) lasts {length:,} s, more than the {MAX_WORKLOAD_S:,} s "
                            "(30 days) a run may have")
    return out


def _get(spec: Mapping[str, Any], key: str, default: Any = None, *, positive: bool = False) -> Any:
    value = spec.get(key, default)
    if value is None:
        raise UserError(f"workload '{spec.get('kind')}' needs '{key}'")
    if isinstance(default, int | float) or isinstance(value, int | float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UserError(f"workload '{spec.get('kind')}': '{key}' must be a number, got {brief(value)}")
        if not math.isfinite(value):
            raise UserError(f"workload '{spec.get('kind')}': '{key}' must be finite, got {value}")
        if value < 0 or (positive and value == 0):
            raise UserError(f"workload '{spec.get('kind')}': '{key}' must be {'> 0' if positive else '>= 0'}")
    return value


def taxi_duration_s(spec: Mapping[str, Any]) -> int:
    """Length in seconds of a taxi replay: days of trace divided by the speed-up."""
    speed = _get(spec, "speed", 10, positive=True)
    days = _get(spec, "days", 2, positive=True)
    length = days * 86400 / speed
    if not math.isfinite(length) or length > 10 * MAX_WORKLOAD_S:
        raise UserError(f"workload 'taxi': days / speed = {length:g} s, far beyond the {MAX_WORKLOAD_S:,} s (30 days) "
                        "a run may last")
    return int(round(length))


def taxi_mean_rate(hour_of_day: float, spec: Mapping[str, Any]) -> float:
    """Expected records/s of a taxi replay when the trace clock is at `hour_of_day`."""
    speed = _get(spec, "speed", 10, positive=True)
    dup = _get(spec, "duplication", 3, positive=True)
    per_day = _get(spec, "rides_per_day", 500_000, positive=True)
    share = TAXI_HOURLY_SHARE[int(hour_of_day) % 24]
    return per_day * share / 3600.0 * speed * dup


def workload_duration_s(spec: Mapping[str, Any]) -> int:
    """The natural length of a workload in seconds (taxi: from days and speed; steps: levels x step_s)."""
    kind = spec.get("kind")
    if kind == "taxi":
        return taxi_duration_s(spec)
    if kind == "steps":
        levels = spec.get("levels") or []
        return int(len(levels) * _get(spec, "step_s", 600, positive=True))
    if kind == "csv" and spec.get("duration_s") is None:
        rows = _read_rate_csv(Path(str(_get(spec, "path"))))
        return int(math.ceil(rows[-1][0])) + 1
    return int(_get(spec, "duration_s", positive=True))


def _read_rate_csv(path: Path) -> list[tuple[float, float]]:
    from gesscale.inputfile import check_regular, read_text

    if not path.exists() and not path.is_symlink():
        raise UserError(f"workload CSV not found: {path}")
    check_regular(path, "workload CSV")
    text = read_text(path, "workload CSV", hint=" (a rate CSV is text: header t_s,rate)")
    try:
        with io.StringIO(text, newline="") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or not {"t_s", "rate"} <= {f.strip() for f in reader.fieldnames}:
                raise UserError(f"{path}: a rate CSV needs the header columns t_s,rate")
            rows = []
            for i, row in enumerate(reader, start=2):
                row = {k.strip(): v for k, v in row.items() if k is not None}
                try:
                    t, r = float(row["t_s"]), float(row["rate"])
                except (TypeError, ValueError):
                    raise UserError(f"{path}:{i}: t_s and rate must be numbers") from None
                if not (math.isfinite(t) and math.isfinite(r)):
                    raise UserError(f"{path}:{i}: t_s and rate must be finite numbers")
                if t < 0 or r < 0:
                    raise UserError(f"{path}:{i}: t_s and rate must not be negative")
                if t > MAX_CSV_TIME_S:
                    raise UserError(f"{path}:{i}: t_s {t:g} is beyond {MAX_CSV_TIME_S:g} s (30 days)")
                rows.append((t, r))
    except csv.Error as err:
        raise UserError(f"{path}: not a rate CSV ({err})") from None
    if not rows:
        raise UserError(f"{path}: no rows")
    rows.sort()
    return rows


def rate_profile(spec: Mapping[str, Any], duration_s: int | None = None, seed: int = 0) -> np.ndarray:
    """Records/s for each second of the workload (length `duration_s`, default the workload's own length).

    Deterministic for a given seed. Values are never negative.
    """
    if not isinstance(spec, Mapping):
        raise UserError("workload must be a mapping with a 'kind'")
    kind = spec.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise UserError(f"unknown workload kind {brief(kind)}; expected one of {', '.join(WORKLOAD_KINDS)}")
    n = int(duration_s if duration_s is not None else workload_duration_s(spec))
    if n <= 0:
        raise UserError("workload duration must be positive")
    if n > MAX_WORKLOAD_S:
        raise UserError(f"workload lasts {n:,} s, more than the {MAX_WORKLOAD_S:,} s (30 days) a run may have")
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)

    if kind == "taxi":
        speed = _get(spec, "speed", 10, positive=True)
        start_hour = _get(spec, "start_hour", 0)
        hours = (start_hour + t * speed / 3600.0) % 24
        shares = np.asarray(TAXI_HOURLY_SHARE)[hours.astype(int)]
        dup = _get(spec, "duplication", 3, positive=True)
        per_day = _get(spec, "rides_per_day", 500_000, positive=True)
        ride_rate = per_day * shares / 3600.0 * speed
        # Poisson ride arrivals; each ride is sent `dup` times.
        rate = rng.poisson(ride_rate).astype(float) * dup
    elif kind == "cosine":
        mean, amp = _get(spec, "mean", 0), _get(spec, "amplitude", 0)
        period = _get(spec, "period_s", 3600, positive=True)
        noise = _get(spec, "noise", 0.0)
        rate = mean + amp * np.cos(2 * np.pi * t / period)
        if noise:
            rate = rate * (1 + rng.normal(0.0, noise, n))
    elif kind == "random":
        mean, spread = _get(spec, "mean", 0), _get(spec, "spread", 0)
        jump_prob, step = _get(spec, "jump_prob", 0.01), _get(spec, "step", 0.02)
        lo, hi = max(0.0, mean - spread), mean + spread
        rate = np.empty(n)
        level = mean
        jumps = rng.random(n) < jump_prob
        targets = rng.uniform(lo, hi, n)
        walk = rng.normal(0.0, step * max(mean, 1.0), n)
        for i in range(n):
            level = targets[i] if jumps[i] else min(hi, max(lo, level + walk[i]))
            rate[i] = level
    elif kind in ("increasing", "decreasing"):
        default_start, default_end = (0, None) if kind == "increasing" else (None, 0)
        start, end = _get(spec, "start", default_start), _get(spec, "end", default_end)
        rate = start + (end - start) * t / max(1, n - 1)
    elif kind == "spike":
        base, peak = _get(spec, "base", 0), _get(spec, "peak", 0)
        at, width = _get(spec, "at_s", n // 2), _get(spec, "width_s", 300, positive=True)
        rate = np.where((t >= at) & (t < at + width), peak, base).astype(float)
    elif kind == "steps":
        levels = spec.get("levels")
        if not isinstance(levels, list) or not levels:
            raise UserError("workload 'steps' needs 'levels', a non-empty list of rates")
        for v in levels:
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise UserError(f"workload 'steps': level {v!r} is not a rate >= 0")
        step_s = _get(spec, "step_s", 600, positive=True)
        idx = np.minimum((t // step_s).astype(int), len(levels) - 1)
        rate = np.asarray(levels, dtype=float)[idx]
    else:  # csv
        rows = _read_rate_csv(Path(str(_get(spec, "path"))))
        times = np.asarray([r[0] for r in rows])
        values = np.asarray([r[1] for r in rows])
        idx = np.searchsorted(times, t, side="right") - 1
        rate = np.where(idx >= 0, values[np.clip(idx, 0, None)], 0.0)
    return np.maximum(rate, 0.0)
