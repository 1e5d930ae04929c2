"""Errors that are the user's to fix (bad input, missing binary, port taken).

The CLI prints such an error as one line on stderr and exits with code 2; anything else is a bug and keeps
its traceback.
"""


class UserError(Exception):
    """A problem in what the user gave us (file, flag, environment), reported as one clear line."""

    exit_code = 2
