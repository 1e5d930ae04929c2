"""Shared pytest configuration.

Fixtures of each area live in their own module under `tests/fixtures/` and are loaded here, so that areas
do not edit one shared file.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path

import tests.fixtures as _fixtures

pytest_plugins = [
    f"tests.fixtures.{m.name}" for m in pkgutil.iter_modules([str(Path(_fixtures.__file__).parent)])
]
