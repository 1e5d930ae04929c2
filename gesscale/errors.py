"""Errors that are the user's to fix (bad input, missing binary, port taken).

The CLI prints such an error as one line on stderr and exits with code 2; anything else is a bug and keeps
its traceback.
"""

import re


class UserError(Exception):
    """A problem in what the user gave us (file, flag, environment), reported as one clear line."""

    exit_code = 2


# Characters of a value quoted in an error message: a huge value (a megabyte string, an exploded YAML alias) must
# not make a huge line.
BRIEF_CHARS = 80


def cut(text: str, limit: int = BRIEF_CHARS) -> str:
    """`text` cut to about `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


# The longest error line printed: a message that quotes many values is cut here (each value is already cut).
MAX_LINE_CHARS = 1000
# The longest run of characters without a space kept whole in an error line (a path fits; a value is cut).
LONG_WORD_CHARS = 160


def one_line(message: str) -> str:
    """An error message as the CLI prints it: control characters a value brought in are escaped (a newline in a
    host name must not start a second line) and the whole is cut at `MAX_LINE_CHARS`."""
    text = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in message)
    # A value quoted without `brief` (a 400-digit number, a long word) is cut here: any run without a space.
    text = re.sub(rf"\S{{{LONG_WORD_CHARS},}}", lambda m: cut(m.group(0), LONG_WORD_CHARS), text)
    return cut(text, MAX_LINE_CHARS)


def brief(value: object, limit: int = BRIEF_CHARS) -> str:
    """`repr(value)` cut to about `limit` characters (`cut`): how an error message quotes a value."""
    return cut(repr(value), limit)
