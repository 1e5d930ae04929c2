"""The progress bar of long CLI runs (on stderr, so stdout stays the report)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def run_progress(console: Console, transient: bool = True) -> Progress:
    """A bar with description, count done / total, elapsed and remaining time; hidden when not on a terminal."""
    return Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=transient,
        disable=not console.is_terminal,
    )
