"""The docs' options table is the code's."""

from __future__ import annotations

from pathlib import Path

from gesscale.config import ControllerConfig

ROOT = Path(__file__).resolve().parents[2]


def test_options_table_in_docs_matches_the_config() -> None:
    text = (ROOT / "docs" / "controller.md").read_text()
    for name, default, help_text in ControllerConfig.describe():
        assert f"| `{name}` | {default} | {help_text} |" in text, name
