"""`gesscale options`: every controller option with its default and meaning."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table


def register(app: typer.Typer) -> None:
    """Add the `options` command."""

    @app.command("options")
    def options(markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table (for docs).")) -> None:
        """List every controller option (name, default, description), as the docs table does."""
        from gesscale.config import ControllerConfig

        rows = ControllerConfig.describe()
        if markdown:
            typer.echo("| option | default | meaning |\n| --- | --- | --- |")
            for name, default, text in rows:
                typer.echo(f"| `{name}` | {default} | {text} |")
            return
        table = Table(title="Controller options (gesscale.config.ControllerConfig)", title_justify="left")
        for col in ("option", "default", "meaning"):
            table.add_column(col)
        for name, default, text in rows:
            table.add_row(name, str(default), text)
        Console().print(table)
