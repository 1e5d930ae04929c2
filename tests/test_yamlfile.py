"""`gesscale.yamlfile` and `gesscale.inputfile`: the limits of a user's YAML file (size, aliases, depth, integer
digits, FIFOs and devices), the reason of a syntax error, and the C and pure-Python loaders giving the same
values and the same errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml

from gesscale import inputfile
from gesscale.errors import UserError, brief
from gesscale.yamlfile import LOADERS, MAX_DEPTH, parse_yaml, read_yaml

ROOT = Path(__file__).resolve().parents[1]


def _bomb(levels: int = 9) -> str:
    """The "billion laughs": each level 9 aliases of the previous one (1 KB of text, 9^levels strings)."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _error(path: Path) -> str:
    with pytest.raises(UserError) as err:
        read_yaml(path, "scenario")
    return str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    (_bomb(), "aliases expand to more than 100,000 extra nodes"),
    ("[" * 250 + "]" * 250, f"nested more than {MAX_DEPTH} levels deep"),
    ("[" * 60_000 + "]" * 60_000, f"nested more than {MAX_DEPTH} levels deep"),
    ("- " * 60_000 + "x\n", f"nested more than {MAX_DEPTH} levels deep"),
    ("a: &a [*a]\n", "a recursive alias"),
    ("seed: " + "9" * 400 + "\n", "an integer of more than 30 digits"),
    ("a: 1\na: 2\n", "duplicate key 'a' at line 2"),
    ("a:\n\tb: 1\n", "malformed YAML at line 2: found character '\\t' that cannot start any token (YAML indents"),
])
def test_a_hostile_or_broken_file_is_one_short_line(tmp_path: Path, text: str, message: str) -> None:
    """A 1 KB alias bomb gave a 35.8 MB error line, larger ones and a deep nesting hung or crashed the process;
    a tab gave no reason. Now: one line under 300 characters, saying why."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = _error(path)
    assert message in line, line
    assert "\n" not in line and len(line) < 300 + len(str(path))


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "binary", "gzip", "large"])
def test_only_a_regular_text_file_of_bounded_size_is_read(tmp_path: Path, kind: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/zero or a FIFO as an input file hung the command; now refused from its stat before any read."""
    path = tmp_path / "in.yaml"
    expected = {"fifo": "is a FIFO (named pipe), not a regular file", "device": "is a device, not a regular file",
                "folder": "is a directory", "binary": "not a text file", "gzip": "a gzip file",
                "large": "more than the 1,000 an input file may have"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00garbage")
    elif kind == "gzip":
        path.write_bytes(b"\x1f\x8b\x08\x00rest")
    else:
        monkeypatch.setattr(inputfile, "MAX_INPUT_BYTES", 1000)
        path.write_text("a: 1\n" * 1000)
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(_error(path)), daemon=True)
    reader.start()
    reader.join(10)  # a FIFO opened for reading without a writer would block here forever
    assert result, "reading did not return"
    assert expected in result[0], result[0]


CASES = [
    "name: t\nvalues: [1, 2.5, -3, 0x1f, 1_000, .inf, true, null, ~, 'q', \"s\", 2026-11-27]\n",
    "a: &x {p: 1, q: [1, 2]}\nb: {<<: *x, q: 3}\nc: *x\n",
    "? [complex, key]\n: v\n",
    "a: 1\n---\nb: 2\n",  # two documents
    "a: [1, 2\n",  # unclosed
    "a: 'unterminated\n",
    "a: 1\n a: 2\n",  # bad indentation
    "a: *undefined\n",
    "a: !!python/object:os.system x\n",  # the safe constructor refuses tags that build objects
    "{[1, 2]: x}\n",  # an unhashable key
    "",
]


@pytest.mark.skipif(len(LOADERS) < 2, reason="PyYAML built without libyaml")
@pytest.mark.parametrize("text", CASES)
def test_the_c_and_python_loaders_agree(text: str) -> None:
    """The C loader (issue 31: faster) and the pure-Python one give the same value, or the same error class,
    problem and line."""
    outcomes = []
    for loader in LOADERS:
        try:
            outcomes.append(("value", parse_yaml(text, loader=loader)))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            outcomes.append(("error", type(err).__name__, getattr(err, "problem", str(err)),
                             None if mark is None else mark.line))
    assert outcomes[0] == outcomes[1], outcomes


def test_the_shipped_yaml_files_load_identically_with_both_loaders() -> None:
    files = sorted([*ROOT.glob("scenarios/**/*.yaml"), *ROOT.glob("inventory/latency/*.yaml")])
    assert len(files) > 10
    for path in files:
        text = path.read_text()
        values = [parse_yaml(text, loader=loader) for loader in LOADERS]
        assert all(v == values[0] for v in values), path


def test_brief_cuts_a_long_value() -> None:
    assert brief("x" * 10) == "'xxxxxxxxxx'"
    cut = brief("x" * 10_000)
    assert len(cut) < 120 and cut.endswith("(9,922 more characters)")
