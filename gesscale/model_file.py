"""Read a performance model file: the output of `gesscale calibrate` or a bare `PerformanceModel.to_dict()`.

Kept apart from `gesscale.model`, which has no I/O.
"""

from __future__ import annotations

import json
from pathlib import Path

from gesscale.errors import UserError
from gesscale.model import PerformanceModel


def load_model_file(path: str | Path) -> PerformanceModel:
    """The model a controller should start from; a bad file is a `UserError`."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise UserError(f"model file not found: {p}") from None
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"cannot read model file {p}: {err}") from None
    doc = data.get("model", data) if isinstance(data, dict) else None
    if not isinstance(doc, dict) or ("measurements" not in doc and doc.get("alpha") is None):
        raise UserError(f"{p}: not a model file (expected the output of `gesscale calibrate`)")
    try:
        return PerformanceModel.from_dict(doc)
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{p}: malformed model ({err})") from None
