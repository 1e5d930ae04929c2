"""The `gesscale` command line.

Each module `gesscale/cli/cmd_*.py` adds its commands through `register(app)`, so command groups are
independent files. `main()` is the one error path: a `UserError` or any usage error (unknown command or option,
missing option, bad value, missing file) is one line on stderr and exit code 2, never a traceback; a bare group
command (`gesscale`, `gesscale netem`) prints its help and exits 2, like any other incomplete command; a file
system error on a path (an unwritable output folder) is one line naming the path, exit 2.
"""

from __future__ import annotations

import errno
import importlib
import os
import pkgutil
import sys

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
    from gesscale.cli.help_text import polish

    polish(app)  # help shown as written: paragraphs unwrapped, brackets literal


_register_commands()


def _click_classes() -> tuple[type[Exception], type[BaseException], type[BaseException]]:
    """ClickException, Exit and Abort as the installed typer raises them.

    typer >= 0.20-ish carries its own copy of click (`typer._click`) whose classes are not those of the `click`
    package, so they are found from typer's public classes rather than imported from `click`.
    """
    click_exception = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return click_exception, typer.Exit, typer.Abort


_CLICK_EXCEPTION, _EXIT, _ABORT = _click_classes()


def _usage_error_line(err: Exception) -> str:
    """One line for a click usage error: the message (its newlines folded) and where to find help."""
    message = " ".join(str(err.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(err, "ctx", None)
    where = ctx.command_path if ctx is not None else "gesscale"
    return f"gesscale: error: {message} (see '{where} --help')"


# A file system error on a path (an output folder that cannot be created, a read-only or unwritable location) is the
# user's to fix wherever in a command it happens: one line naming the path. GESSCALE_TRACEBACK=1 keeps the traceback.
_PATH_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
                errno.ENOSPC}


def _path_error_line(err: OSError) -> str | None:
    """One line for an OSError about a path the user chose, or None when it is something else (a bug)."""
    if err.filename is None or err.errno not in _PATH_ERRNOS or os.environ.get("GESSCALE_TRACEBACK"):
        return None
    names = f"{err.filename}" + (f" -> {err.filename2}" if err.filename2 is not None else "")
    return f"gesscale: error: {names}: {err.strerror}"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes end as one line on stderr with exit code 2, never a traceback."""
    try:
        # Without standalone mode click returns the code of a `typer.Exit` instead of raising it.
        code = app(args=argv, prog_name="gesscale", standalone_mode=False)
    except UserError as err:
        print(f"gesscale: error: {err}", file=sys.stderr)
        return err.exit_code
    except _EXIT as ex:
        return int(ex.exit_code)  # type: ignore[attr-defined]
    except _CLICK_EXCEPTION as err:
        if type(err).__name__ == "NoArgsIsHelpError":
            # A bare group (`gesscale netem`): its help (rich help is printed on stdout while the error is made,
            # plain click's is the message), then the error line; exit 2 as for any other incomplete command.
            help_text = str(err.format_message()).strip()  # type: ignore[attr-defined]
            if help_text:
                print(help_text, file=sys.stderr)
            ctx = getattr(err, "ctx", None)
            where = ctx.command_path if ctx is not None else "gesscale"
            print(f"gesscale: error: missing command (see '{where} --help')", file=sys.stderr)
        else:
            print(_usage_error_line(err), file=sys.stderr)
        return 2
    except OSError as err:
        line = _path_error_line(err)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except (_ABORT, KeyboardInterrupt):
        print("gesscale: interrupted", file=sys.stderr)
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
