"""One error path for the whole CLI: every command and subcommand, discovered from the typer app (so a new
command is walked without editing this file), given bad input exits 2 with one line on stderr naming the
problem and no traceback, before its body runs (no broker, Spark or SSH is started).

Cases: an unknown option (every command and group), an unknown subcommand and a bare group (every group), a
missing required option (commands that have one), a wrong type (every int/float option) and a missing file
(every path option declared `exists=True`). The commands' bodies are replaced by a function that fails the
test, so a case that got past validation cannot start anything.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

from gesscale.cli import app, main

MISSING = "/nonexistent/gesscale-walk/missing.yaml"


def _tree() -> Any:
    """The click command tree typer builds from the app."""
    return typer.main.get_command(app)


def _walk(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(argv prefix, click command) of the root, every group and every command, depth first."""
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _walk(sub, (*path, name))


def _is_group(cmd: Any) -> bool:
    return getattr(cmd, "commands", None) is not None


def _python_type(cmd: Any, param: Any) -> tuple[type | None, Any]:
    """The Python annotation of a parameter (Optional unwrapped) and its typer OptionInfo/ArgumentInfo."""
    fn = inspect.unwrap(cmd.callback)
    hints = typing.get_type_hints(fn)
    annotation = hints.get(param.name)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else None
    info = inspect.signature(fn).parameters[param.name].default
    return annotation if isinstance(annotation, type) else None, info


def _arg(param: Any, value: str) -> list[str]:
    """How to give `value` to a parameter: after its option name, or alone for an argument."""
    return [param.opts[0], value] if param.param_type_name == "option" else [value]


def _cases() -> list[Any]:
    cases = []
    for path, cmd in _walk(_tree()):
        name = " ".join(path) or "gesscale"
        cases.append(pytest.param([*path, "--no-such-option"], ["--no-such-option"], id=f"{name}: unknown option"))
        if _is_group(cmd):
            cases.append(pytest.param([*path, "no-such-command"], ["no-such-command"],
                                      id=f"{name}: unknown command"))
            cases.append(pytest.param(list(path), ["missing command"], id=f"{name}: bare group"))
            continue
        required = [p for p in cmd.params if p.required]
        if required:
            cases.append(pytest.param(list(path), ["Missing", *required[0].opts],
                                      id=f"{name}: missing {required[0].opts[0]}"))
        for param in cmd.params:
            annotation, info = _python_type(cmd, param)
            if annotation in (int, float):
                cases.append(pytest.param([*path, *_arg(param, "not-a-number")], param.opts[:1],
                                          id=f"{name}: {param.opts[0]} not-a-number"))
            elif annotation is not None and issubclass(annotation, Path) and getattr(info, "exists", False):
                cases.append(pytest.param([*path, *_arg(param, MISSING)], [MISSING],
                                          id=f"{name}: {param.opts[0]} missing file"))
    return cases


CASES = _cases()


@pytest.fixture
def bodies_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command's body replaced by one that fails the test: bad input must stop before it."""
    tree = _tree()
    for path, cmd in _walk(tree):
        if not _is_group(cmd):
            def refuse(*_args: Any, _name: str = " ".join(path), **_kwargs: Any) -> None:
                raise AssertionError(f"`gesscale {_name}` ran its body on bad input")

            monkeypatch.setattr(cmd, "callback", refuse)
    monkeypatch.setattr(typer.main, "get_command", lambda _app: tree)


@pytest.mark.parametrize(("argv", "names"), CASES)
@pytest.mark.usefixtures("bodies_refused")
def test_bad_input_is_one_line_and_exit_2(argv: list[str], names: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("gesscale: error: "), err
    if names != ["missing command"]:  # a bare group prints its help first
        assert len(lines) == 1, err
    assert any(n in lines[-1] for n in names), (names, err)


def test_the_walk_reaches_every_command() -> None:
    """The walk sees nested commands, and every kind of case exists (a walk that found nothing would pass)."""
    commands = {" ".join(p) for p, c in _walk(_tree()) if not _is_group(c)}
    assert {"simulate", "netem plan", "broker up", "job run"} <= commands
    ids = " ".join(c.id for c in CASES)
    for kind in ("unknown option", "unknown command", "bare group", "missing --", "not-a-number", "missing file"):
        assert kind in ids, kind


@pytest.mark.usefixtures("bodies_refused")
def test_a_command_that_passes_validation_reaches_the_guard() -> None:
    """The guard is in the tree `main` runs: a valid command gets to its (replaced) body."""
    with pytest.raises(AssertionError, match="gesscale version"):
        main(["version"])


def test_help_and_a_good_command_still_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert main(["version"]) == 0
    assert "Traceback" not in "".join(capsys.readouterr())


@pytest.mark.parametrize("traceback_wanted", [False, True])
def test_an_unwritable_output_path_is_one_line(traceback_wanted: bool, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate --plot` into a folder that cannot be created (under /proc): one line naming it, exit 2; with
    GESSCALE_TRACEBACK=1 the error keeps its traceback."""
    (tmp_path / "map.yaml").write_text("nodes: [a, b]\nrtt_ms:\n  a: {b: 10}\n")
    (tmp_path / "s.yaml").write_text("name: t\ncontrol_period_s: 60\ncluster:\n  latency_map: map.yaml\n"
                                     "operator:\n  alpha: 60\nworkload:\n  kind: steps\n  levels: [50]\n"
                                     "  step_s: 600\n")
    argv = ["simulate", "-s", str(tmp_path / "s.yaml"), "-p", "ideal", "--plot", "/proc/gesscale-no/plots"]
    if traceback_wanted:
        monkeypatch.setenv("GESSCALE_TRACEBACK", "1")
        with pytest.raises(FileNotFoundError):
            main(argv)
        return
    monkeypatch.delenv("GESSCALE_TRACEBACK", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gesscale: error: /proc/gesscale-no: No such file or directory"]


def test_help_into_a_reader_that_closed_the_pipe_blames_no_plugin() -> None:
    # `gesscale --help | head -5`: the reader closes the pipe early; click exits 1 quietly, and gesscale must not
    # report a plug-in that called exit (the line it printed before).
    code = ("import os, sys\n"
            "r, w = os.pipe(); os.close(r)\n"
            "sys.stdout = os.fdopen(w, 'w')\n"
            "from gesscale.cli import main\n"
            "sys.stderr.write(f'code={main([\"--help\"])}\\n')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert "code=1" in done.stderr and "plug-in" not in done.stderr, done.stderr
