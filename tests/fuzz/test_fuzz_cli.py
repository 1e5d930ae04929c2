"""Every numeric and text value of every command, fuzzed by property through the real entry point
(`gesscale.cli.main`): a value is either refused with exit 2 and one line in the shape of
tests/cli/test_cli_errors.py ("gesscale: error: ... naming the option"), or the command reaches its body (replaced,
as there, by a sentinel: nothing starts). A value outside what the option declares (NaN or infinity, more than 18
digits, a control character, beyond typer's min/max) must be refused."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gesscale.cli import main
from tests.cli.test_cli_errors import _arg, _is_group, _python_type, _tree, _walk
from tests.fuzz import strategies as s
from tests.fuzz.caps import capped

ROOT = Path(__file__).resolve().parents[2]
EXISTING = str(ROOT / "scenarios" / "pi10-taxi.yaml")


class ReachedBody(Exception):
    """The command got past every check of its values."""


def _targets() -> list[tuple[tuple[str, ...], Any, type, list[str]]]:
    """(command path, click parameter, Python type, the command's other required values) of every int, float
    and str value of every command."""
    from gesscale.options import controller_options

    # The controller's flags are parsed by their declaration inside the command (`test_fuzz_option_values`).
    controller_flags = {spec.flag for spec in controller_options()}
    out = []
    for path, cmd in _walk(_tree()):
        if _is_group(cmd):
            continue
        for param in cmd.params:
            annotation, _ = _python_type(cmd, param)
            if param.opts[0] in controller_flags:
                continue
            if annotation in (int, float, str) and not getattr(param, "is_flag", False):
                out.append((path, param, annotation, _required(cmd, param)))
    return out


def _required(cmd: Any, skip: Any) -> list[str]:
    """Valid values for the command's other required parameters, so that only the fuzzed one can be wrong."""
    argv: list[str] = []
    for param in cmd.params:
        if param is skip or not param.required:
            continue
        annotation, _ = _python_type(cmd, param)
        value = {int: "1", float: "1"}.get(annotation, EXISTING if annotation is Path else "x")
        argv += _arg(param, value)
    return argv


TARGETS = _targets()


@pytest.fixture
def bodies_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command's body raises `ReachedBody`: the fuzz only judges the values' checks."""
    import typer.main

    tree = _tree()
    for _path, cmd in _walk(tree):
        if not _is_group(cmd):
            def reached(*_a: Any, **_k: Any) -> None:
                raise ReachedBody

            monkeypatch.setattr(cmd, "callback", reached)
    monkeypatch.setattr(typer.main, "get_command", lambda _app: tree)


def _number_text(kind: type) -> st.SearchStrategy[str]:
    as_text = s.numbers.map(lambda v: repr(v) if isinstance(v, float) else str(v))
    return as_text | st.sampled_from(["nan", "-nan", "inf", "-inf", "1e400", "0x10", "1_000", " 1", "1.5", "-0",
                                      "9" * 19, "9" * 400, "", "banana", "1\n"])


def _as_int(text: str) -> int:
    """An integer as typer takes it: digits, or a whole decimal number such as 2.0 (not 1e3, not 0x10)."""
    try:
        return int(text.strip())
    except ValueError:
        number = float(text)
        if "e" in text.lower() or not number.is_integer():
            raise
        return int(number)


def _must_refuse(text: str, kind: type, param: Any) -> str | None:
    """Why this value must be refused (None: it may be taken), from what the option declares."""
    # In a text a control character is refused; around a number, whitespace (a trailing newline) is harmless.
    control = [c for c in text if ord(c) < 32 or ord(c) == 127]
    if kind is str:
        return "control character" if control else None
    if any(not c.isspace() for c in control):
        return "control character"
    try:
        value = float(text) if kind is float else _as_int(text)
    except ValueError:
        return "not a number"
    if kind is float and not math.isfinite(value):
        return "not finite"
    if kind is int and len(str(abs(value))) > 18:
        return "more than 18 digits"
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return "outside min/max"
    return None


@pytest.mark.usefixtures("bodies_reach")
@given(data=st.data())
def test_fuzz_cli_values(data: st.DataObject, capsys: pytest.CaptureFixture[str]) -> None:
    path, param, kind, required = data.draw(st.sampled_from(TARGETS), label="option")
    text = data.draw(_number_text(kind) if kind in (int, float) else s.texts, label="value")
    argv = [*path, *_arg(param, text), *required]
    reached = False
    with capped():
        try:
            code = main(argv)
        except ReachedBody:
            reached = True
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    why = _must_refuse(text, kind, param)
    if reached:
        assert why is None, f"{' '.join(path)} {param.opts[0]} {text!r} was taken ({why})"
        return
    assert code == 2, (argv, code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gesscale: error: "), err
    assert len(lines[0]) < 400, lines[0]
    if why is not None:
        assert any(opt in lines[0] for opt in param.opts) or param.param_type_name == "argument", lines[0]


def test_the_targets_cover_the_kinds() -> None:
    kinds = {k for _p, _q, k, _r in TARGETS}
    assert kinds == {int, float, str}
    assert len(TARGETS) > 100


def _specs() -> list[Any]:
    from gesscale.options import controller_options, policy_options
    from gesscale.policies.base import policy_ids

    return [*controller_options(), *(spec for pid in policy_ids() for spec in policy_options(pid))]


SPECS = _specs()
# The names every option of kind `choice` takes (`model_form`, `latency_source`), so that valid ones are drawn too.
CHOICES = sorted({c for spec in SPECS for c in spec.choices})


@given(st.sampled_from(SPECS), _number_text(float) | s.texts | st.sampled_from(["4h", "1d", "2d", "none", "yes",
                                                                                 *CHOICES]))
def test_fuzz_option_values(spec: Any, text: str) -> None:
    """Every controller and policy option, as `--control-period 2d` or `--policy-option bins=1e9` give it: a value
    within the declared range, or one `UserError` line."""
    from gesscale.errors import UserError, one_line

    with capped():
        try:
            value = spec.parse(text, "--flag")
        except UserError as err:
            line = one_line(str(err))
            assert "\n" not in line and len(line) < 400 and spec.name in line, line
            return
    if value is None or isinstance(value, bool):
        assert value is None or spec.kind == "bool"
        return
    if spec.kind == "choice":
        assert value in spec.choices, (spec.name, text, value)
        return
    assert math.isfinite(value), (spec.name, text, value)
    assert spec.lo is None or value >= spec.lo, (spec.name, text, value)
    assert spec.hi is None or value <= spec.hi, (spec.name, text, value)
    assert spec.kind == "bool" or spec.hi is not None, f"{spec.name} declares no upper bound"


@pytest.mark.usefixtures("bodies_reach")
@pytest.mark.parametrize("argv", [["--day", "1e9"], ["--peak-load", "1e300"], ["--probe", "1e12"],
                                  ["--drain-timeout", "1e15"], ["--rides-per-day", "999999999999"],
                                  ["--start-hour", "24"]])
def test_demo_numbers_beyond_their_declared_range_are_refused(argv: list[str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the local-spec property: the demo's numbers had no upper bound (a day of 1e9 s was taken); the
    flags now carry the ranges of `LOCAL_RANGES`, so the fuzz above checks them too."""
    try:
        code = main(["demo", *argv])
    except ReachedBody:
        pytest.fail(f"demo {' '.join(argv)} was taken")
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("gesscale: error: ") and argv[0] in err, err
