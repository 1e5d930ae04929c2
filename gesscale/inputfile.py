"""Reading a file the user names as input: a regular file of bounded size, or one `UserError` line saying why not.

A FIFO or a device given as input (`/dev/zero` as a rate CSV, a named pipe as a scenario) would block or never
end; it is refused from its `stat` before anything is read, and the file is opened non-blocking so that even a
FIFO swapped in between cannot hang the open. A file larger than the limit of its kind is refused rather than
read whole into memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gesscale.errors import UserError

# Largest input file read whole: a dense 2,000-node latency map in YAML is about 60 MB, so this leaves room and
# still refuses a runaway (a log or a binary given by mistake).
MAX_INPUT_BYTES = 128 * 2**20


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular(path: str | Path, what: str) -> Path:
    """`path` if it names an existing regular file; a `UserError` for a missing path, a folder, a FIFO, a device."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise UserError(f"{what} not found: {p}") from None
    except OSError as err:
        raise UserError(f"cannot read {what} {p}: {err.strerror}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {p} is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {p} is {_kind(mode)}, not a regular file")
    return p


def read_bytes(path: str | Path, what: str, limit: int | None = None) -> bytes:
    """The content of a regular file of at most `limit` bytes (default `MAX_INPUT_BYTES`); `what` names the kind
    of file in error messages ("scenario", ...)."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    p = check_regular(path, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise UserError(f"cannot read {what} {p}: {err.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            raise UserError(f"{what} {p} is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise UserError(f"{what} {p} is {st.st_size:,} bytes, more than the {limit:,} an input file may have")
        try:
            data = fh.read(limit + 1)
        except OSError as err:
            raise UserError(f"cannot read {what} {p}: {err.strerror}") from None
    if len(data) > limit:
        raise UserError(f"{what} {p} is more than the {limit:,} bytes an input file may have")
    return data


def read_text(path: str | Path, what: str, limit: int | None = None, *, hint: str = "") -> str:
    """`read_bytes` decoded as UTF-8; a binary file (or a gzip one) is a `UserError` ("not a text file")."""
    data = read_bytes(path, what, limit)
    if data[:2] == b"\x1f\x8b":
        raise UserError(f"{path}: a gzip file; a {what} is read as plain text (gunzip it first)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file{hint}") from None
    if "\x00" in text:
        raise UserError(f"{path}: not a text file (it holds NUL bytes){hint}")
    return text
