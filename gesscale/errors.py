"""Errors that are the user's to fix (bad input, missing binary, port taken).

The CLI prints such an error as one line on stderr and exits with code 2; anything else is a bug and keeps
its traceback.
"""


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


def brief(value: object, limit: int = BRIEF_CHARS) -> str:
    """`repr(value)` cut to about `limit` characters (`cut`): how an error message quotes a value."""
    return cut(repr(value), limit)
