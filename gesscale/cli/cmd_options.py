"""`gesscale options`: every controller option and every policy's options, from their one declaration."""

from __future__ import annotations

import typer
from rich.table import Table


def options_markdown() -> str:
    """The tables of `gesscale options --markdown` (docs/controller.md holds a copy; a test keeps it in step)."""
    from gesscale.options import options_rows

    lines: list[str] = []
    for section, rows in options_rows():
        lines += [f"**{section}**", "", "| option | default | range | meaning |", "| --- | --- | --- | --- |"]
        lines += [f"| `{name}` | {default} | {bounds} | {text} |" for name, default, bounds, text in rows]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def register(app: typer.Typer) -> None:
    """Add the `options` command."""

    @app.command("options")
    def options(
        markdown: bool = typer.Option(False, "--markdown", help="Print Markdown tables (for docs)."),
        wide: bool = typer.Option(False, "--wide", help="Print each table at its full width; by default a table "
                                  "wider than the terminal (COLUMNS; 80 when piped) is stacked into parts that fit."),
    ) -> None:
        """List every controller option, then each policy's options (name, default, range, meaning).

        Controller options are flags of simulate, compare, run, k8s run and demo (`control_period_s` is
        --control-period: the key without `_s`, `-` for `_`) and keys of a scenario's `controller:` section;
        a default that differs per command is shown beside it. Policy options are given as --policy-option
        [POLICY.]KEY=VALUE or under a scenario's `policy_options: {POLICY: {KEY: VALUE}}`. Durations take
        10, 10s, 2m or 1h.
        """
        from gesscale.options import options_rows

        if markdown:
            typer.echo(options_markdown(), nl=False)
            return
        from gesscale.cli.tables import output_console, print_table

        console = output_console()
        for section, rows in options_rows():
            source = "gesscale.config.ControllerConfig" if section == "controller" else "constructor options"
            table = Table(title=f"{section} ({source})", title_justify="left")
            for col in ("option", "flag / key", "default", "range", "meaning"):
                table.add_column(col)
            for name, default, bounds, text in rows:
                flag = "--" + name.removesuffix("_s").replace("_", "-") if section == "controller" else name
                table.add_row(name, flag, default, bounds, text)
            print_table(console, table, wide)
