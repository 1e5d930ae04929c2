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
import math
import os
import pkgutil
import sys
from collections.abc import Callable
from typing import Any

import typer
import typer.main

from gesscale.errors import UserError, brief, one_line

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
    from gesscale.figures import formats

    formats()  # a wrong GESSCALE_FIGURE_FORMATS is one line before any work, not after a long run


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


# Every value given on the command line, whatever the option, is checked by kind before a command sees it: a
# number must be finite (`nan` and `inf` pass every range check unnoticed) and an integer at most 18 digits; a
# text (a name, an image, a path, KEY=VALUE) holds no control character (a newline in `--image` would become a
# second line of a manifest or script). A number must also lie in the range its option declares
# (`gesscale.cli.ranges`).
MAX_INT_DIGITS = 18


def value_problem(value: Any) -> str | None:
    """What is wrong with a converted command-line value (None: nothing), by its Python type."""
    if isinstance(value, list | tuple):
        return next((p for p in map(value_problem, value) if p), None)
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if isinstance(value, int) and len(str(abs(value))) > MAX_INT_DIGITS:
        return f"must have at most {MAX_INT_DIGITS} digits, got a {len(str(abs(value)))}-digit number"
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if isinstance(text, str) and any(ord(c) < 32 or ord(c) == 127 for c in text):
        return f"must not contain control characters (newline, tab, ...), got {brief(text)}"
    return None


def _number_text(value: Any) -> float | None:
    """A number written as text (`5000`, `1e3`, ` 2.5`, `nan`), else None (left to the option's own type)."""
    if not isinstance(value, str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _checked(process_value: Callable[[Any, Any], Any], param: Any) -> Callable[[Any, Any], Any]:
    from gesscale.cli.ranges import declared_range, help_range, outside, range_problem

    declared = declared_range(param)
    if declared[:2] != (None, None):  # --help shows the range as the error line does, open ends with `<`
        param._get_number_range_help_str = lambda: help_range(declared)

    def process_checked(ctx: Any, value: Any) -> Any:
        # A number outside the option's declared range: one error naming the range (typer's names one end)
        number = _number_text(value) if declared[:2] != (None, None) else None
        if number is not None and not math.isfinite(number):  # as `value_problem` says it of an unranged number
            raise typer.BadParameter(f"must be a finite number, got {number!r}", ctx=ctx, param=param)
        if number is not None and outside(number, declared):
            raise typer.BadParameter(range_problem(number, declared), ctx=ctx, param=param)
        converted = process_value(ctx, value)
        # the raw text too: int('1\n') converts, but a control character is never part of a value
        raw = value if isinstance(value, str | list | tuple) else None
        problem = value_problem(converted) or (value_problem(raw) if raw is not None else None)
        if problem:
            raise typer.BadParameter(problem, ctx=ctx, param=param)
        return converted

    process_checked.gesscale_checked = True  # type: ignore[attr-defined]
    return process_checked


def harden(command: Any) -> Any:
    """Give every parameter of the command tree the checks of `value_problem`; returns the tree."""
    stack = [command]
    while stack:
        cmd = stack.pop()
        stack.extend((getattr(cmd, "commands", None) or {}).values())
        for param in cmd.params:
            if not getattr(param.process_value, "gesscale_checked", False):
                param.process_value = _checked(param.process_value, param)
    return command


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes end as one line on stderr with exit code 2, never a traceback."""
    try:
        # Without standalone mode click returns the code of a `typer.Exit` instead of raising it.
        command = harden(typer.main.get_command(app))
        code = command(args=argv, prog_name="gesscale", standalone_mode=False)
    except UserError as err:
        print(f"gesscale: error: {one_line(str(err))}", file=sys.stderr)
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
    except SystemExit as ex:  # gesscale itself never calls exit inside a command: a plug-in or a query did
        if isinstance(ex.__context__, BrokenPipeError) or type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
            return 1  # the reader closed the pipe (`gesscale --help | head`): rich's and click's exit 1, no plug-in
        print(f"gesscale: error: code loaded from a file (a policy plug-in or a query) called exit({brief(ex.code)});"
              " it must raise an exception instead", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
