"""The docs agree with the code: the options table, the modules the architecture page names, no external citations."""

from __future__ import annotations

import re
from pathlib import Path

from gesscale.cli.cmd_options import options_markdown
from gesscale.config import ControllerConfig

ROOT = Path(__file__).resolve().parents[1]


def test_options_table_in_docs_matches_the_config() -> None:
    """docs/controller.md holds what `gesscale options --markdown` prints, every option with its help."""
    text = (ROOT / "docs" / "controller.md").read_text()
    assert options_markdown() in text
    for name, _default, help_text in ControllerConfig.describe():
        assert f"| `{name}` |" in text and help_text in text, name


# Source folders where a module named bare (`fleet.py`) in docs/architecture.md may live.
SOURCE_DIRS = ("gesscale", "jobs", "producer", "netem")


def test_architecture_page_names_modules_that_exist() -> None:
    """Every path and module docs/architecture.md names exists, so the newcomer's map follows the code."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w./-]+(?:\.py|\.md|/))`", text))
    named |= set(re.findall(r"\b(docs/[\w-]+\.md)", text))
    assert len(named) > 40, "the page should name the modules a newcomer needs"
    missing = []
    for name in sorted(named):
        if "/" in name:
            found = (ROOT / name).exists() or (ROOT / "gesscale" / name).exists()
        else:
            found = any(next((ROOT / d).rglob(name), None) for d in SOURCE_DIRS)
        if not found:
            missing.append(name)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_docs_cite_docs_not_an_external_design_file() -> None:
    """The design contracts live in docs/: no code, test or doc cites the former external DESIGN file by section."""
    pattern = re.compile(r"DESIGN(?:\.md)? ?§|DESIGN \d")
    offenders = []
    for folder in ("gesscale", "jobs", "producer", "netem", "tests", "docs", "playbooks", "inventory"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".yml", ".yaml") and pattern.search(path.read_text(errors="replace")):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


def test_the_name_rules_in_docs_are_the_declared_patterns() -> None:
    """docs/validation.md, "Names": one row per kind of `gesscale.names.PATTERNS`, with its pattern."""
    from gesscale.names import PATTERNS

    text = (ROOT / "docs" / "validation.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (\w+) \| [^\n]*\| `([^`]+)` \|$", text, re.M)}
    assert {k: v.replace("\\|", "|") for k, v in rows.items() if k in PATTERNS} == PATTERNS
