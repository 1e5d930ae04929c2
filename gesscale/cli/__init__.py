"""The `gesscale` command line.

Each module `gesscale/cli/cmd_*.py` adds its commands through `register(app)`, so command groups are
independent files. `main()` turns a `UserError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click
import typer

from gesscale.errors import UserError

app = typer.Typer(
    name="gesscale",
    help=(
        "Fog testbed and latency-aware autoscaler for stream processing on edge clusters.\n\n"
        "Simulate and compare autoscaling policies, run brokers, replay the NYC taxi trace, run the Spark "
        "job, provision a Pi cluster and emulate WAN latencies."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root() -> None:
    """Fog testbed and latency-aware autoscaler for stream processing on edge clusters."""


def _register_commands() -> None:
    """Import every `cmd_*` module of this package and let it add its commands."""
    package = sys.modules[__name__]
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            module.register(app)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes end as one line on stderr with exit code 2, never a traceback."""
    try:
        # Without standalone mode click returns the code of a `typer.Exit` instead of raising it.
        code = app(args=argv, standalone_mode=False)
    except UserError as err:
        print(f"gesscale: error: {err}", file=sys.stderr)
        return err.exit_code
    except click.exceptions.Exit as ex:
        return ex.exit_code
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except click.exceptions.Abort:
        print("gesscale: interrupted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("gesscale: interrupted", file=sys.stderr)
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
