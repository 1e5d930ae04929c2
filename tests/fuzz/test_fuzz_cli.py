"""Every numeric and text value of every command, fuzzed by property through the real entry point
(`gesscale.cli.main`): a value is either refused with exit 2 and one line in the shape of
tests/cli/test_cli_errors.py ("gesscale: error: ... naming the option"), or the command reaches its body (replaced,
as there, by a sentinel: nothing starts). A value outside what the option declares (NaN or infinity, more than 18
digits, a control character, outside its declared range) must be refused.

Every number of every command declares both ends of its range (`gesscale.cli.ranges`): the numbers are found by
walking the command tree, so a new one without a range fails `test_every_number_declares_its_range`."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gesscale.cli import main
from gesscale.cli.ranges import declared_range, outside, range_text
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
    out = []
    for path, cmd in _walk(_tree()):
        if _is_group(cmd):
            continue
        for param in cmd.params:
            annotation, _ = _python_type(cmd, param)
            if _from_controller_flags(cmd, param):
                continue
            if annotation in (int, float, str) and not getattr(param, "is_flag", False):
                out.append((path, param, annotation, _required(cmd, param)))
    return out


def _from_controller_flags(cmd: Any, param: Any) -> bool:
    """Whether `@controller_flags` made this parameter: the command parses it by the option's declaration
    (`gesscale.options`, fuzzed by `test_fuzz_option_values`). A command's own `--seed` is not one of them."""
    from gesscale.options import controller_options

    made = getattr(inspect.unwrap(cmd.callback), "controller_env", None) is not None
    return made and param.name in {spec.name for spec in controller_options()}


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
    if outside(value, declared_range(param)):
        return "outside its declared range"
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


# Every int and float option of every command (the controller's flags are `SPECS`, checked by their declaration).
NUMBERS = [(path, param, kind, required) for path, param, kind, required in TARGETS if kind in (int, float)]


def _label(path: tuple[str, ...], param: Any) -> str:
    return f"{' '.join(path)} {param.opts[0]}"


def test_every_number_declares_its_range() -> None:
    """Both ends of every number's range are declared: each option of each command (found by walking the command
    tree, so that a new option without a range fails here) and each controller and policy option."""
    missing = [_label(path, param) for path, param, _k, _r in NUMBERS if None in declared_range(param)[:2]]
    assert missing == [], f"declare a range (gesscale.cli.ranges.number_range) for: {', '.join(missing)}"
    assert len(NUMBERS) >= 60, len(NUMBERS)
    unbounded = [s.name for s in SPECS if s.kind in ("int", "float", "duration") and None in (s.lo, s.hi)]
    assert unbounded == [], unbounded


def _text(value: float, kind: type) -> str:
    return str(int(value)) if kind is int else repr(float(value))


def _beyond(param: Any, kind: type) -> list[str]:
    """The nearest values outside the declared range on both sides (the open end itself), far ones, NaN and
    infinity: every one must be refused."""
    lo, hi, lo_open, hi_open = declared_range(param)
    if kind is int:
        below, above = (lo if lo_open else lo - 1), (hi if hi_open else hi + 1)
    else:
        below = lo if lo_open else math.nextafter(lo, -math.inf)
        above = hi if hi_open else math.nextafter(hi, math.inf)
    return [_text(below, kind), _text(above, kind), "nan", "inf", "-inf", _text(-(10**15), kind),
            _text(10**15, kind)]


def _within(param: Any, kind: type) -> list[str]:
    """Both ends (or the nearest values inside an open one) and the middle: none may be refused by the range."""
    lo, hi, lo_open, hi_open = declared_range(param)
    if kind is int:
        first, last = (lo + 1 if lo_open else lo), (hi - 1 if hi_open else hi)
        return [_text(first, kind), _text(last, kind), _text((first + last) // 2, kind)]
    first = math.nextafter(lo, math.inf) if lo_open else lo
    last = math.nextafter(hi, -math.inf) if hi_open else hi
    return [_text(first, kind), _text(last, kind), _text((lo + hi) / 2, kind)]


def _run(path: tuple[str, ...], param: Any, text: str, required: list[str]) -> tuple[int | None, str]:
    """`gesscale PATH OPTION TEXT ...` through the real entry point: (exit code, stderr); None: the body was
    reached (the value passed every check)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code: int | None = main([*path, *_arg(param, text), *required])
        except ReachedBody:
            code = None
    return code, err.getvalue()


def _assert_refused(path: tuple[str, ...], param: Any, text: str, code: int | None, err: str) -> None:
    what = f"{_label(path, param)} {text}"
    assert code == 2, f"{what}: taken (exit {code}); its range is {range_text(declared_range(param))}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gesscale: error: "), (what, err)
    assert any(opt in lines[0] for opt in param.opts), (what, lines[0])
    number = float(text)
    if math.isfinite(number):  # NaN and infinity: "must be a finite number", as for any other number
        assert range_text(declared_range(param)) in lines[0], (what, lines[0])


def _assert_taken(path: tuple[str, ...], param: Any, text: str, code: int | None, err: str) -> None:
    assert code is None, f"{_label(path, param)} {text}: refused inside {range_text(declared_range(param))}: {err}"


@pytest.mark.usefixtures("bodies_reach")
def test_every_number_refuses_what_is_outside_its_range() -> None:
    """For each number of each command: the values just beyond each end, far beyond, NaN and infinity are one
    line naming the option and its range, exit 2; both ends and the middle of the range reach the command."""
    for path, param, kind, required in NUMBERS:
        assert None not in declared_range(param)[:2], f"{_label(path, param)} declares no range"
        for text in _beyond(param, kind):
            _assert_refused(path, param, text, *_run(path, param, text, required))
        for text in _within(param, kind):
            code, err = _run(path, param, text, required)
            _assert_taken(path, param, text, code, err)


def _relative_value(param: Any, kind: type) -> st.SearchStrategy[str]:
    """A value drawn around the option's declared range: inside it, or beyond either end by any amount."""
    lo, hi, lo_open, hi_open = declared_range(param)
    if kind is int:
        inside = st.integers(int(lo) + lo_open, int(hi) - hi_open)
        below = st.integers(-(10**17), int(lo) - (not lo_open))
        above = st.integers(int(hi) + (not hi_open), 10**17)
        return (inside | below | above).map(str)
    inside = st.floats(lo, hi, exclude_min=lo_open, exclude_max=hi_open)
    below = st.floats(max_value=lo, exclude_max=not lo_open, allow_nan=False)
    above = st.floats(min_value=hi, exclude_min=not hi_open, allow_nan=False)
    return (inside | below | above).map(repr) | st.sampled_from(["nan", "-nan", "inf", "-inf"])


@pytest.mark.usefixtures("bodies_reach")
@given(data=st.data())
def test_fuzz_cli_ranges(data: st.DataObject) -> None:
    """Any value, inside a number's declared range or beyond it by any amount: taken exactly when inside."""
    path, param, kind, required = data.draw(st.sampled_from(NUMBERS), label="option")
    assert None not in declared_range(param)[:2], f"{_label(path, param)} declares no range"
    text = data.draw(_relative_value(param, kind), label="value")
    with capped():
        code, err = _run(path, param, text, required)
    if outside(float(text), declared_range(param)):
        _assert_refused(path, param, text, code, err)
    else:
        _assert_taken(path, param, text, code, err)


def test_run_duration_beyond_a_year_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --duration` is a text (5m, 2h), so its range is checked in the command, before anything starts (the
    next error would be the attached testbed that does not exist: nothing is brought up either way)."""
    code = main(["run", "--testbed", str(tmp_path / "nothing"), "--duration", "400d"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("gesscale: error: --duration must be in (0, 31536000]"), err
