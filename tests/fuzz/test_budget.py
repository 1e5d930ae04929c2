"""The fuzz budget names every property of the folder, and only those (tests/fuzz/conftest.py)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from tests.fuzz.conftest import BUDGET


def _properties() -> set[str]:
    names = set()
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("test_"):
            module = importlib.import_module(f"tests.fuzz.{mod.name}")
            names |= {n for n, f in vars(module).items() if getattr(f, "is_hypothesis_test", False)
                      and n.startswith("test_") and f.__module__ == module.__name__}
    return names


def test_every_property_has_a_budget() -> None:
    props = _properties()
    assert props - set(BUDGET) == set(), "budget these properties in tests/fuzz/conftest.py"
    assert set(BUDGET) - props == set(), "these budgeted properties no longer exist"


def test_no_property_sets_its_own_examples() -> None:
    """An own @settings would bypass the budget (the conftest leaves such a test alone)."""
    own = set()
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("test_"):
            module = importlib.import_module(f"tests.fuzz.{mod.name}")
            own |= {n for n, f in vars(module).items() if getattr(f, "_hypothesis_internal_settings_applied", False)
                    and not getattr(f, "gesscale_budgeted", False)}
    assert own == set(), f"give these their examples in BUDGET (tests/fuzz/conftest.py), not @settings: {own}"
