"""Every policy looks different in every figure (gesscale/figures.py `policy_style`), and the policies of the
paper's comparison differ by colour, not by line style alone."""

from __future__ import annotations

from gesscale.figures import STYLE_FIRST, policy_style
from gesscale.policies.base import policy_ids


def test_every_policy_has_a_look_of_its_own() -> None:
    looks = {pid: (policy_style(pid)["color"], policy_style(pid)["linestyle"]) for pid in policy_ids()}
    assert len(set(looks.values())) == len(looks)
    assert len({policy_style(pid)["marker"] for pid in policy_ids()}) == len(list(policy_ids()))


def test_the_compared_policies_have_distinct_colours() -> None:
    assert set(STYLE_FIRST) <= set(policy_ids())
    colours = [policy_style(pid)["color"] for pid in STYLE_FIRST]
    assert len(set(colours)) == len(colours)  # gesscale and mdl-nlunaware shared one in registry order
