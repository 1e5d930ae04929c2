"""Console tables that fit the terminal: the output console's width, and a wide table stacked into parts.

A table wider than the console is printed as a stack of tables, each with the first (key) column and as many of
the next columns as fit, so every cell keeps its full text: no column is squeezed until its numbers wrap or are
cut to an ellipsis. `--wide` prints the one table at its natural width instead. JSON and Markdown outputs are
not concerned: they always hold every column.

The width is the terminal's; `COLUMNS`, when set, wins; output that is not a terminal (a pipe, a file) is 80
columns wide unless `COLUMNS` says otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import sys

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

DEFAULT_WIDTH = 80  # output that is not a terminal, without COLUMNS


def output_width(stream: object = None) -> int:
    """Columns available to the output: `COLUMNS` when set to a number, else the terminal's, else 80."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def output_console(stderr: bool = False) -> Console:
    """A console of `output_width()` columns (stdout, or stderr)."""
    return Console(width=output_width(sys.stderr if stderr else sys.stdout), stderr=stderr)


def natural_width(table: Table) -> int:
    """The columns the table takes when nothing in it is wrapped."""
    probe = Console(width=100_000)
    return Measurement.get(probe, probe.options, table).maximum


def _with_columns(table: Table, columns: list[Column], title: str | None) -> Table:
    part = copy.copy(table)
    part.columns = [dataclasses.replace(c, _index=i, overflow="fold") for i, c in enumerate(columns)]
    part.title = title
    return part


def stack(table: Table, width: int) -> list[Table]:
    """The table as one or more tables no wider than `width` (when a single column allows it), each repeating
    the first column; every cell is kept whole (a column is never cut to '…', at worst it wraps)."""
    columns = list(table.columns)
    if natural_width(table) <= width or len(columns) <= 2:
        return [_with_columns(table, columns, table.title)]
    key, rest = columns[0], columns[1:]
    groups: list[list[Column]] = [[]]
    for col in rest:
        trial = groups[-1] + [col]
        if groups[-1] and natural_width(_with_columns(table, [key, *trial], None)) > width:
            groups.append([col])
        else:
            groups[-1] = trial
    title = str(table.title) if table.title is not None else None
    parts = []
    for i, group in enumerate(groups, 1):
        part_title = f"{title} ({i}/{len(groups)})" if title else f"({i}/{len(groups)})"
        part = _with_columns(table, [key, *group], part_title)
        if i < len(groups):
            part.caption = None
        parts.append(part)
    return parts


def print_table(console: Console, table: Table, wide: bool = False) -> None:
    """Print the table to fit the console (stacked when too wide), or with `wide` at its natural width."""
    if wide:
        width = max(natural_width(table), console.width)
        Console(file=console.file, width=width, force_terminal=console.is_terminal,
                color_system=console.color_system).print(_with_columns(table, list(table.columns), table.title))
        return
    for part in stack(table, console.width):
        if part.title is not None and natural_width(part) < console.width:
            # a title wider than its part would be wrapped to the part's width: print it on its own line
            console.print(Text(str(part.title), style="table.title"))
            part.title = None
        console.print(part)
