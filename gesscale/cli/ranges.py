"""The declared range of every number a command takes, and how a command-line value is held to it.

A numeric option (an `int` or `float` parameter of a command) declares its range where it is declared, with
`**number_range(lo, hi)` among its `typer.Option` arguments: typer then shows `[lo<=x<=hi]` in `--help` and the
CLI's one error path (`gesscale.cli.main`) refuses a value outside it with one line naming the option and the
range, exit 2. Both ends are always given, so that "outside its range" means something for every number (the
fuzz tests enumerate the commands' numbers and fail on one without them: tests/fuzz/test_fuzz_cli.py). An end may
be open (`lo_open`: `--rate` takes any positive rate, not 0).

The same quantity has the same range wherever it is given: a workload's numbers (`--speed`, `--days`, `--rate`,
`--duration` of `produce`) as a scenario's `workload:` (`gesscale.workloads`), a seed as the controller's `seed`,
the testbed's CPU budget and port shift as the demo's (`gesscale.testbed.demo.LOCAL_RANGES`), an executor count
as the job's scaling hook takes it (`jobs.http_api.MAX_TARGET`). The bounds chosen here stop nonsense (a memory
blow-up, a run that never ends, an overflow) and sit far above what a run needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer

from gesscale.config import DAY_S, MAX_SEED
from jobs.http_api import MAX_TARGET

YEAR_S = 365 * DAY_S  # how long a command may wait or run: idle timeouts, give-up times
PORT = (1, 65535)
MAX_RECORDS = 10**12  # records a run sends or forwards: a million a second for eleven days
MAX_PARTITIONS = 10_000  # partitions of a Kafka topic the producer or the bridge creates
MQTT_KEEPALIVE_S = (5, 3600)  # paho's and mosquitto's sensible range; below 5 s a busy link looks dead
MAX_WORKERS = 1024  # processes of a simulation pool
MAX_STEPS = 10**9  # control periods of a bounded run
SEED = (0, MAX_SEED)  # as the controller option `seed` (gesscale/config.py)
SEEDS = (1, 1000)  # runs per policy of simulate, compare and demo --simulated-only
EXECUTORS = (0, MAX_TARGET)  # executors of the job, as its scaling hook takes a target
MAX_ROWS_PER_BATCH = 10_000_000  # the job's admission control: records per micro-batch, or per task

Range = tuple[float | None, float | None, bool, bool]  # (lo, hi, lo_open, hi_open); None: no bound that side


def _open_ends(rng: Range) -> Callable[[Any], Any]:
    """The callback typer calls with the converted value of an option with an open end: refuses the end itself
    (typer's `min`/`max` are inclusive). It carries the range (`declared_range` reads it back)."""

    def check(value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool) and outside(value, rng):
            raise typer.BadParameter(range_problem(value, rng))
        return value

    check.gesscale_range = rng  # type: ignore[attr-defined]
    return check


def number_range(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> dict[str, Any]:
    """The `typer.Option` arguments declaring that a number lies in [lo, hi] (an end excluded when open)."""
    if not lo < hi:
        raise ValueError(f"an empty range: [{lo}, {hi}]")
    args: dict[str, Any] = {"min": lo, "max": hi}
    if lo_open or hi_open:
        args["callback"] = _open_ends((lo, hi, lo_open, hi_open))
    return args


def local_range(key: str) -> dict[str, Any]:
    """`number_range` of a number of the local testbed, as the demo declares it once (`LOCAL_RANGES`: fog nodes,
    CPU budget, port shift, ...), for every command that brings a testbed up."""
    from gesscale.testbed.demo import LOCAL_RANGES

    lo, hi, integer = LOCAL_RANGES[key]
    return number_range(int(lo), int(hi)) if integer else number_range(lo, hi)


def declared_range(param: Any) -> Range:
    """(lo, hi, lo_open, hi_open) a click parameter of a command declares (None for an end it does not)."""
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    declared = getattr(getattr(info, "callback", None), "gesscale_range", None)
    if declared is not None:
        return lo, hi, declared[2], declared[3]
    return lo, hi, False, False


def outside(value: float, rng: Range) -> bool:
    """Whether `value` misses the range (NaN misses every range)."""
    lo, hi, lo_open, hi_open = rng
    if math.isnan(value):
        return True
    below = lo is not None and (value <= lo if lo_open else value < lo)
    above = hi is not None and (value >= hi if hi_open else value > hi)
    return below or above


def shown(value: float) -> str:
    """A bound as written: `31536000`, `0.5`, `1e+12`."""
    if float(value).is_integer() and abs(value) < 1e10:
        return str(int(value))
    return f"{value:g}"


def range_text(rng: Range) -> str:
    """The range as the error line and the help show it: `[1, 1000]`, `(0, 30]`, `>= 0`."""
    lo, hi, lo_open, hi_open = rng
    if lo is None and hi is None:
        return "any number"
    if hi is None:
        return f"{'>' if lo_open else '>='} {shown(lo)}"
    if lo is None:
        return f"{'<' if hi_open else '<='} {shown(hi)}"
    return f"{'(' if lo_open else '['}{shown(lo)}, {shown(hi)}{')' if hi_open else ']'}"


def range_problem(value: float, rng: Range) -> str:
    """The error of a value outside the range: `must be in [1, 1000], got 5000`."""
    text = range_text(rng)
    got = str(value) if isinstance(value, int) else f"{value:.12g}"
    return f"must be {'in ' if text[:1] in '[(' else ''}{text}, got {got}"


def help_range(rng: Range) -> str | None:
    """The range as typer shows it in `--help` (`1<=x<=1000`), with `<` at an open end (`0<x<=30`)."""
    lo, hi, lo_open, hi_open = rng
    if lo is None and hi is None:
        return None
    left = "" if lo is None else f"{shown(lo)}{'<' if lo_open else '<='}"
    right = "" if hi is None else f"{'<' if hi_open else '<='}{shown(hi)}"
    return f"{left}x{right}"
