"""Importing a researcher's own Python file by its path (a policy plug-in, a query): one way, one kind of error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from gesscale.errors import UserError, brief, cut


def import_file(path: Path, what: str) -> ModuleType:
    """The module in `path`, imported under a name of its own; any failure is one `UserError` starting with `what`
    (a missing file, not Python, or the exception the file's own code raised, named)."""
    from gesscale.inputfile import MAX_INPUT_BYTES, check_regular

    if not path.is_file():
        if path.exists():
            check_regular(path, what)  # a folder, a FIFO, a device: said as such
        raise UserError(f"{what}: no such file {str(path)!r}")
    if path.stat().st_size > MAX_INPUT_BYTES:
        raise UserError(f"{what}: {path.name} is larger than {MAX_INPUT_BYTES:,} bytes; not a plug-in")
    name = f"gesscale_user_{abs(hash(str(path.resolve()))):x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{what}: cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's code: what it raised, in one line
        sys.modules.pop(name, None)
        if isinstance(err, SystemExit):
            raise UserError(f"{what}: importing {path.name} called exit({brief(err.code)}); a plug-in must not "
                            "exit (raise an exception to refuse)") from None
        text = " ".join(str(err).split())
        raise UserError(f"{what}: importing {path.name} failed: {type(err).__name__}: {cut(text)}") from None
    return module
