"""Output paths checked before a command does its work: an unwritable `--json` or `--out` is found in the first
second, not after an hour of simulation. Nothing is created here; the command creates folders when it writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from gesscale.errors import UserError


def _nearest_existing(path: Path) -> Path:
    """`path` or its closest ancestor that exists (the folder a `mkdir -p` would start from)."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _creatable_under(path: Path, flag: str) -> None:
    """Refuse a path whose missing folders cannot be created: the nearest existing ancestor must be a writable
    folder."""
    base = _nearest_existing(path)
    if base == path.absolute():
        return
    if not base.is_dir():
        raise UserError(f"{flag} {path}: {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: cannot create it, {base} is not writable")


def check_output_file(path: Path | None, flag: str) -> None:
    """A file the command will write (`--json out.json`): refused when it is a folder, not writable, or its
    folder cannot be made."""
    if path is None:
        return
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file name")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UserError(f"{flag} {path}: the file is not writable")
        return
    _creatable_under(path, flag)


def check_output_dir(path: Path | None, flag: str) -> None:
    """A folder the command will write into (`--out`, `--plot`): refused when it is a file, not writable, or
    cannot be made."""
    if path is None:
        return
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{flag} {path} is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UserError(f"{flag} {path}: the folder is not writable")
        return
    _creatable_under(path, flag)
