"""Read a user's YAML file; a missing, unreadable or malformed file is one `UserError` naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gesscale.errors import UserError


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed document of `path`; `what` names the kind of file in error messages ("scenario", ...)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise UserError(f"{what} not found: {p}") from None
    except OSError as err:
        raise UserError(f"cannot read {what} {p}: {err.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}: malformed YAML{where}") from None
