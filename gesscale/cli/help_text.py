"""Help text as it is written in the code, shown as written: unwrapped paragraphs, literal brackets.

typer's rich help keeps every line break of a docstring, so a paragraph wrapped at 120 columns in the source
shows broken mid-sentence in any other width; and it reads help as rich markup, so "[default: x]" in a help
string vanishes as an unknown tag. `polish(app)` rewrites the help of every command, group and option once,
after the commands are registered: each paragraph joined into one line (a line that starts a list item keeps
its break) and markup brackets escaped.
"""

from __future__ import annotations

import inspect
import re

import typer
from rich.markup import escape
from typer.models import ArgumentInfo, OptionInfo

_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def unwrap(text: str) -> str:
    """Join the lines of each paragraph (blank-line separated) into one; a list item keeps its own line."""
    paragraphs = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = [ln.strip() for ln in para.splitlines()]
        joined: list[str] = []
        for ln in lines:
            if joined and not _LIST_ITEM.match(ln):
                joined[-1] += " " + ln
            else:
                joined.append(ln)
        paragraphs.append("\n".join(joined))
    return "\n\n".join(paragraphs)


def _shown(text: str) -> str:
    return escape(unwrap(text))


def polish(app: typer.Typer, _seen: set[int] | None = None) -> None:
    """Rewrite the help of every command, group and parameter of `app` (recursively) to be shown as written."""
    seen = set() if _seen is None else _seen
    if app.info.help and isinstance(app.info.help, str):
        app.info.help = _shown(app.info.help)
    for cmd in app.registered_commands:
        text = cmd.help if isinstance(cmd.help, str) else inspect.getdoc(cmd.callback) or ""
        cmd.help = _shown(text) if text else cmd.help
        if cmd.callback is None:
            continue
        for param in inspect.signature(cmd.callback).parameters.values():
            info = param.default
            if isinstance(info, (OptionInfo, ArgumentInfo)) and isinstance(info.help, str) and id(info) not in seen:
                seen.add(id(info))  # an OptionInfo shared by several commands is escaped once
                info.help = _shown(info.help)
    for group in app.registered_groups:
        if isinstance(group.help, str):
            group.help = _shown(group.help)
        if group.typer_instance is not None:
            polish(group.typer_instance, seen)
