"""Our plan against tcconfig: `tcset --tc-command` (dry run) for the same per-destination delays.

tcconfig (https://github.com/thombashi/tcconfig) builds the same kind of tree: htb root, an htb class per
shaping rule, a netem leaf, a u32 filter on the destination. Handles and rates differ; the structure and the
delay per destination must not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from gesscale.latency_map import latency_map_from_dict
from netem.plan import build_plan

MAP = {
    "nodes": {"h1": {}, "h2": {}, "h3": {}},
    "rtt_ms": {"h1": {"h2": 12.0, "h3": 81.0}, "h2": {"h3": 47.5}},
}
ADDR = {"h1": "10.231.0.11", "h2": "10.231.0.12", "h3": "10.231.0.13"}


def tree(lines: list[str]) -> dict[str, tuple[str, float]]:
    """From tc add commands: {destination: (leaf kind, delay ms)}, checking the htb/class/leaf/u32 chain."""
    root = None
    classes, leaves, filters = set(), {}, {}
    for line in lines:
        words = line.split()
        if not words:
            continue
        words[0] = Path(words[0]).name  # tcconfig prints /usr/sbin/tc
        text = " ".join(words)
        if m := re.match(r"tc qdisc add dev \S+ root handle (\S+) htb", text):
            root = m.group(1)
        elif m := re.match(r"tc class add dev \S+ parent (\S+) classid (\S+) htb", text):
            assert m.group(1) == root, text
            classes.add(m.group(2))
        elif m := re.match(r"tc qdisc add dev \S+ parent (\S+) handle \S+ (\w+)(?: delay ([\d.]+)ms)?", text):
            leaves[m.group(1)] = (m.group(2), float(m.group(3) or 0))
        elif m := re.match(r"tc filter add dev \S+ .*parent (\S+) .*u32 match ip dst (\S+)/32 .*flowid (\S+)", text):
            assert m.group(1) == root, text
            filters[m.group(2)] = m.group(3)
        else:
            raise AssertionError(f"unexpected tc command: {text}")
    assert root is not None
    out = {}
    for dst, classid in filters.items():
        assert classid in classes, f"filter for {dst} points to a missing class"
        out[dst] = leaves[classid]
    return out


def test_plan_matches_tcset_for_the_same_delays(tmp_path):
    tcset = shutil.which("tcset", path=str(Path(sys.executable).parent))
    assert tcset, "tcconfig's tcset is a dev dependency (pyproject.toml)"
    plans = build_plan(latency_map_from_dict(MAP), ADDR, {n: "lo" for n in ADDR})
    for node, plan in plans.items():
        ours = tree([" ".join(c) for c in plan.apply_commands()])
        theirs: dict[str, tuple[str, float]] = {}
        for rule in plan.rules:
            printed = subprocess.run(
                [tcset, "lo", "--delay", f"{rule.delay_ms}ms", "--network", rule.address, "--tc-command"],
                capture_output=True, text=True, check=True, cwd=tmp_path,
            ).stdout  # fmt: skip
            theirs.update(tree(printed.splitlines()))
        assert ours == theirs, node
        assert set(ours) == {ADDR[p] for p in ADDR if p != node}
        assert all(kind == "netem" for kind, _ in ours.values())
