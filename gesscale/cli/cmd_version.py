"""`gesscale version`."""

from __future__ import annotations

import typer

from gesscale import __version__


def register(app: typer.Typer) -> None:
    """Add the `version` command."""

    @app.command("version")
    def version() -> None:
        """Print the gesscale version."""
        typer.echo(__version__)
