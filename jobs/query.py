"""The query contract: what the job runs between its Kafka source and its exactly-once sink.

A query is one function `build(rides: DataFrame) -> DataFrame`. `rides` is the streaming DataFrame of the good
records as the job parses them (`jobs/records.py`: `RIDE_COLUMNS`, typed, plus `partition`, `offset` and the
record's JSON text `value`); bad records never reach it (the source counts and dead-letters them). The result
must have a unique `key` (string or binary, what exactly-once is judged by) and a `value` (string or binary);
an int `partition` column, when kept, sends each row to output partition `partition mod N` (else a hash of the
key chooses). The job owns everything else: offsets, admission control, metrics, the scaling hook, the sink.

`--query` takes a built-in name (`BUILT_IN`), `path/to/file.py[:function]` or `package.module[:function]`
(function `build` by default). A module may set `NAME`, `OUTPUT_KEY` (a phrase saying what the key is) and
`PER_RECORD = True` when its output holds exactly one row per good input record, keyed by that record's unique
`key` (a map, as `nearest-landmark`): the testbed then checks exactly-once on the output's keys; for any other
query (a filter, an aggregation) it checks, on the input side, that every record was consumed by exactly one
committed micro-batch, and that no output key was written twice (gesscale/testbed/keys.py).
Every mistake in the value is a `UserError` raised here, before Spark starts.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gesscale.errors import UserError
from gesscale.user_module import import_file

BUILT_IN = {"nearest-landmark": "jobs.queries.nearest_landmark", "frequent-routes": "jobs.queries.frequent_routes"}
DEFAULT_FUNCTION = "build"


@dataclass(frozen=True)
class Query:
    """A loaded query: its name, its `build` function and what its output key is."""

    name: str
    build: Callable[[Any], Any]
    output_key: str
    spec: str
    per_record: bool = False  # one output row per good input record, keyed by its unique key (`PER_RECORD`)


def split_spec(spec: str) -> tuple[str, str]:
    """('path or module', 'function') of a `--query` value; the function defaults to `build`."""
    target, sep, func = spec.rpartition(":")
    if not sep or "/" in func or "\\" in func or func.endswith(".py"):  # no function given (or a Windows drive)
        return spec, DEFAULT_FUNCTION
    return target, func or DEFAULT_FUNCTION


def kind_of(spec: str) -> str:
    """'built-in', 'file' or 'module': how a `--query` value names its query (no import, no file access
    beyond telling whether a bare name is a file here)."""
    spec = spec.strip()
    if spec in BUILT_IN:
        return "built-in"
    target, _ = split_spec(spec)
    return "file" if target.endswith(".py") or "/" in target or Path(target).is_file() else "module"


def _load_file(path: Path) -> ModuleType:
    module = import_file(path, "--query")
    # executors cannot import a file by path: functions defined in it travel by value
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return module


def _load_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise UserError(f"--query: no built-in query, file or module {name!r} (built-in: "
                        f"{', '.join(BUILT_IN)})") from err
    except Exception as err:  # noqa: BLE001
        raise UserError(f"--query: importing {name!r} failed: {type(err).__name__}: {err}") from err


def _check_signature(func: Any, where: str) -> None:
    """One positional parameter (the rides) and no other required one."""
    if not callable(func):
        raise UserError(f"--query: {where} is not a function")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as err:
        raise UserError(f"--query: cannot read the signature of {where}: {err}") from err
    try:
        sig.bind(object())
    except TypeError:
        raise UserError(f"--query: {where}{sig} must take exactly one argument, the rides DataFrame") from None


def load_query(spec: str) -> Query:
    """The query named by a `--query` value (module docstring); `UserError` for anything wrong with it."""
    spec = spec.strip()
    if not spec:
        raise UserError("--query must not be empty")
    if spec in BUILT_IN:
        module, func_name = importlib.import_module(BUILT_IN[spec]), DEFAULT_FUNCTION
    else:
        target, func_name = split_spec(spec)
        module = _load_file(Path(target)) if kind_of(spec) == "file" else _load_module(target)
    func = getattr(module, func_name, None)
    where = f"{func_name} in {spec.rpartition(':')[0] if ':' in spec else spec}"
    if func is None:
        raise UserError(f"--query: no function {func_name!r} in {module.__name__ if spec in BUILT_IN else spec}")
    _check_signature(func, where)
    name = str(getattr(module, "NAME", spec if spec in BUILT_IN else Path(split_spec(spec)[0]).stem))
    return Query(name=name, build=func, output_key=str(getattr(module, "OUTPUT_KEY", "key")), spec=spec,
                 per_record=getattr(module, "PER_RECORD", False) is True)


def check_output(df: Any, query: Query) -> None:
    """UserError unless the query's output has the columns the sink needs (`key`, `value`, optional `partition`)."""
    types = {f.name: f.dataType.typeName() for f in df.schema.fields}
    for col in ("key", "value"):
        if types.get(col) not in ("string", "binary"):
            raise UserError(f"query {query.name!r}: its output needs a string or binary column {col!r} "
                            f"(has {', '.join(f'{k} {v}' for k, v in types.items()) or 'no columns'})")
    if "partition" in types and types["partition"] not in ("integer", "long", "short"):
        raise UserError(f"query {query.name!r}: output column 'partition' must be an integer")
    if not df.isStreaming:
        raise UserError(f"query {query.name!r}: build() must return a DataFrame derived from the rides it was given")
