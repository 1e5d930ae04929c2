"""Shared pytest configuration.

Fixtures of each area live in their own module under `tests/fixtures/` and are loaded here, so that areas
do not edit one shared file.
"""

from __future__ import annotations

import os
import pkgutil
from pathlib import Path

import tests.fixtures as _fixtures

# Figures as PNG only (docs/figures.md): the SVG and PDF copies cost two thirds of every figure's time, for every
# test that runs a simulation, a comparison or an experiment. tests/test_figures.py checks all three formats.
os.environ.setdefault("GESSCALE_FIGURE_FORMATS", "png")

pytest_plugins = [
    f"tests.fixtures.{m.name}" for m in pkgutil.iter_modules([str(Path(_fixtures.__file__).parent)])
]
