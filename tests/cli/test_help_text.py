"""`--help` shows the help as written: a paragraph is not broken where its source line ended, and brackets in a
help string ("[default: ...]") are not eaten as rich markup."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from rich.text import Text

from gesscale.cli import app, main
from gesscale.cli.help_text import unwrap

LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def commands(cmd: Any, path: str = "gesscale") -> Iterator[tuple[str, Any]]:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from commands(sub, f"{path} {name}")


ALL = list(commands(typer.main.get_command(app)))


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[p for p, _ in ALL])
def test_no_paragraph_is_hard_wrapped(path: str, cmd: Any) -> None:
    for para in (cmd.help or "").split("\n\n"):
        for line in para.splitlines()[1:]:
            assert LIST_ITEM.match(line), f"{path}: a paragraph breaks before {line[:40]!r}"


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[p for p, _ in ALL])
def test_brackets_of_help_strings_are_shown(path: str, cmd: Any) -> None:
    texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    for text in texts:
        shown = Text.from_markup(text).plain
        assert shown.count("[") == text.replace("\\[", "[").count("["), f"{path}: {text!r} shows as {shown!r}"


def test_demo_help_shows_the_report_default(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["demo", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Report JSON [default: <out>/report.json]." in out and "Report JSON ." not in out


def test_unwrap_keeps_paragraphs_and_list_items() -> None:
    assert unwrap("one\n  two\n\n- a\n- b\n  c") == "one two\n\n- a\n- b c"
