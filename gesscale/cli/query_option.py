"""The job's `--query` flag, declared once for `job run`, `demo`, `run`, `calibrate` and `k8s render`
(the contract: jobs/query.py, docs/queries.md)."""

from __future__ import annotations

from typing import Any

import typer

DEFAULT_QUERY = "nearest-landmark"
QUERY_HELP = ("The job's query: nearest-landmark, frequent-routes (DEBS 2015 Query 1), or your own "
              "path/to/my_query.py[:function] or package.module[:function] (docs/queries.md).")


def query_option(prefix: str = "", default: str | None = DEFAULT_QUERY) -> Any:
    """`--query SPEC`; `default` None lets a command tell "not given" apart (e.g. when attaching to a testbed)."""
    return typer.Option(default, "--query", help=prefix + QUERY_HELP
                        + ("" if default is not None else f" [default: {DEFAULT_QUERY}]"))


def checked_query(spec: str | None) -> str:
    """The `--query` value once it loads (UserError, one line, exit 2, before anything starts); a file is made
    absolute, since the job it is handed to may run in another folder."""
    from pathlib import Path

    from jobs.query import kind_of, load_query, split_spec

    value = (DEFAULT_QUERY if spec is None else spec).strip()
    load_query(value)
    if kind_of(value) == "file":
        target, func = split_spec(value)
        value = f"{Path(target).resolve()}:{func}"
    return value
