"""The console table of a simulated twin against its live run (`gesscale.fidelity`), for `demo` and
`experiment replay`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from gesscale.cli.tables import print_table
from gesscale.fidelity import table_cells
from gesscale.twin_decisions import decision_cells


def print_fidelity(console: Console, rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """Print the fidelity rows as one table (figure, live, twin, error, error %, goal, within), fitted to the
    console."""
    header, cells = table_cells(rows)
    table = Table(title=title)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in cells:
        table.add_row(*row)
    print_table(console, table)


def print_decisions(console: Console, result: Mapping[str, Any]) -> None:
    """Print the live run's decisions against its twin's (`gesscale.twin_decisions.compare_seeds`): one table of
    the first seed (live t, kind, twin t, kind, time apart, verdict), then its differences, one line each."""
    seed, first = next(iter(result["seeds"].items()), (None, None))
    if first is None:
        return
    header, cells = decision_cells(first)
    table = Table(title=f"{result['policy']}: decisions live / twin (seed {seed}): {first['matched']} of "
                        f"{first['live']} the same (±{first['tolerance_s']:g} s); twin {first['twin']}")
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i in (1, 3, 5) else "right")
    for row in cells:
        table.add_row(*row)
    print_table(console, table)
    for line in first["differences"]:
        console.print(f"  {line}")


def twin_summary(measured: Mapping[str, Any] | None) -> str:
    """One line: what the twin was built from (period achieved, per direction the measured timing, the input)."""
    if not measured:
        return "simulated twin: built from the recorded calibrated scenario"
    kinds = "; ".join(f"{k}: effective after {t['effective_s']:g} s, pause {t['pause_s']:g} s"
                      + (f", next observation after {t['observation_gap_s']:g} s" if "observation_gap_s" in t else "")
                      for k, t in (measured.get("by_kind") or {}).items())
    inp = measured.get("input") or {}
    return (f"simulated twin built from the run's measurements: period achieved {measured['control_period_s']:g} s"
            f" over {measured['periods']} observations; {kinds or 'no reconfiguration'}; input "
            f"{inp.get('records', 0):,} records over {inp.get('seconds', 0)} s; {measured.get('mst_points', 0)} "
            "MST points")
