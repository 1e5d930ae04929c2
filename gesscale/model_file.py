"""Read a performance model file: the output of `gesscale calibrate` or a bare `PerformanceModel.to_dict()`.

Kept apart from `gesscale.model`, which has no I/O.
"""

from __future__ import annotations

import json
from pathlib import Path

from gesscale.errors import UserError
from gesscale.inputfile import read_text
from gesscale.model import PerformanceModel


def _no_constant(name: str) -> float:
    """JSON's non-standard NaN and Infinity are not numbers a model can hold."""
    raise ValueError(f"{name} is not a finite number")


def load_model_file(path: str | Path) -> PerformanceModel:
    """The model a controller should start from; a bad file is a `UserError`."""
    p = Path(path)
    text = read_text(p, "model file", hint=" (a model file is the JSON `gesscale calibrate` writes)")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as err:
        raise UserError(f"cannot read model file {p}: {err}") from None
    doc = data.get("model", data) if isinstance(data, dict) else None
    if not isinstance(doc, dict) or ("measurements" not in doc and doc.get("alpha") is None):
        raise UserError(f"{p}: not a model file (expected the output of `gesscale calibrate`)")
    try:
        return PerformanceModel.from_dict(doc)
    except (KeyError, TypeError, ValueError, OverflowError) as err:
        raise UserError(f"{p}: malformed model ({err})") from None
