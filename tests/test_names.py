"""The one rule for names (gesscale/names.py): each kind's pattern, the one-line message, the path guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.names import PATTERNS, check_name, inside, is_name

BAD_EVERYWHERE = ["", "a\nb", "a b", "../a", "a/../../b", ".", "..", "-rf", "a;b", "a$(x)", "a`x`", "a'b", 'a"b',
                  "a\x00", "a\tb", "é", "a\\b", None, 3, ["a"]]  # fmt: skip


@pytest.mark.parametrize("kind", sorted(PATTERNS))
def test_no_kind_admits_a_path_a_space_a_newline_or_a_shell_character(kind: str) -> None:
    for value in BAD_EVERYWHERE:
        assert not is_name(kind, value), (kind, value)


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        ("host", ["pi01", "pi01.lan", "node_1", "a" * 63], ["a" * 64, ".pi", "_pi"]),
        ("node", ["pi01", "edge-3", "10"], ["a" * 64]),
        ("region", ["umea", "eu-north.1"], ["umea-", "a" * 64]),
        ("tag", ["tb0", "a-b_c"], ["a.b", "a" * 21]),
        ("scenario", ["pi10-spike", "spike_2"], ["a/b"]),
        ("experiment", ["paper.v2"], ["a/b"]),
        ("policy", ["gesscale-plus", "flink-autoscaler"], ["a:b"]),
        ("image", ["gesscale-job:0.1.0", "registry.local/gesscale-job:0.1.0", "localhost:5000/a/b:v1",
                   "ghcr.io/org/img@sha256:" + "a" * 64, "busybox"],
         ["Gesscale:1", "a:b:c", "a:" + "t" * 129, "registry.local/", "img@sha256:xyz", "a" * 256]),
    ],
)
def test_each_kind_admits_what_it_can_legitimately_be(kind: str, good: list[str], bad: list[str]) -> None:
    for value in good:
        assert check_name(kind, value, "f") == value
    for value in bad:
        assert not is_name(kind, value), value


def test_the_message_is_one_line_names_the_field_and_the_pattern_and_cuts_the_value() -> None:
    with pytest.raises(UserError) as err:
        check_name("scenario", "x\n" + "y" * 10_000, "s.yaml: name")
    line = str(err.value)
    assert "\n" not in line and line.startswith("s.yaml: name: 'x\\ny") and PATTERNS["scenario"] in line
    assert len(line) < 80 + 120 and "..." in line


def test_inside_keeps_a_derived_path_in_its_folder(tmp_path: Path) -> None:
    assert inside(tmp_path, "a-b.csv") == tmp_path / "a-b.csv"
    for name in ("../x.csv", "/etc/x", "a/../../x"):
        with pytest.raises(UserError, match="outside"):
            inside(tmp_path, name)
