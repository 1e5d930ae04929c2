"""The per-node tc plan: structure, delays, idempotent script, and bad input caught before any host."""

from __future__ import annotations

import pytest

from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from netem.plan import STRUCTURAL_LEAF, build_plan

MAP = {
    "nodes": {"a": {}, "b": {}, "c": {}},
    "rtt_ms": {"a": {"b": 10, "c": 40.5}, "b": {"c": 25}},
}
ADDR = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
DEV = {"a": "eth0", "b": "eth1", "c": "wlan0"}


def test_every_node_gets_half_the_rtt_toward_every_peer():
    plans = build_plan(latency_map_from_dict(MAP), ADDR, DEV)
    got = {n: {r.peer: (r.address, r.delay_ms) for r in p.rules} for n, p in plans.items()}
    assert got == {
        "a": {"b": ("10.0.0.2", 5.0), "c": ("10.0.0.3", 20.25)},
        "b": {"a": ("10.0.0.1", 5.0), "c": ("10.0.0.3", 12.5)},
        "c": {"a": ("10.0.0.1", 20.25), "b": ("10.0.0.2", 12.5)},
    }
    assert plans["b"].device == "eth1"


def test_commands_build_htb_root_class_leaf_and_filter_per_destination():
    plan = build_plan(latency_map_from_dict(MAP), ADDR, DEV)["a"]
    cmds = [" ".join(c) for c in plan.apply_commands()]
    assert cmds[0] == "tc qdisc add dev eth0 root handle 1: htb default 1"
    classes = {r.classid for r in plan.rules}
    assert len(classes) == 2 and "1:1" not in classes
    for rule in plan.rules:
        assert f"tc class add dev eth0 parent 1: classid {rule.classid} htb rate 10gbit" in cmds
        leaf = f"tc qdisc add dev eth0 parent {rule.classid} handle {rule.leaf_handle} netem delay"
        assert any(c.startswith(leaf) for c in cmds)
        filt = f"u32 match ip dst {rule.address}/32 flowid {rule.classid}"
        assert any(c.endswith(filt) for c in cmds)
    assert "netem delay 20.25ms" in " ".join(cmds)


def test_script_deletes_before_adding_and_tolerates_an_absent_root():
    script = build_plan(latency_map_from_dict(MAP), ADDR, DEV)["c"].apply_script()
    lines = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "set -e"
    assert lines[1] == "tc qdisc del dev wlan0 root 2>/dev/null || true"
    assert all(line.startswith("tc ") and " add " in line for line in lines[2:])


def test_structural_mode_replaces_only_the_leaf():
    lmap = latency_map_from_dict(MAP)
    real = build_plan(lmap, ADDR, DEV, "netem")["a"].apply_commands()
    structural = build_plan(lmap, ADDR, DEV, "structural")["a"].apply_commands()
    assert len(real) == len(structural)
    differing = [(r, s) for r, s in zip(real, structural, strict=True) if r != s]
    assert len(differing) == 2
    for r, s in differing:
        assert "netem" in r and " ".join(s).endswith(STRUCTURAL_LEAF)


def test_clear_removes_the_root_only():
    plan = build_plan(latency_map_from_dict(MAP), ADDR, DEV)["a"]
    assert plan.clear_commands() == [["tc", "qdisc", "del", "dev", "eth0", "root"]]
    assert plan.marker_path() in plan.clear_script()


@pytest.mark.parametrize(
    ("addresses", "devices", "mode", "message"),
    [
        ({"a": "10.0.0.1", "b": "10.0.0.2"}, DEV, "netem", "c not in the inventory"),
        (ADDR, {"a": "eth0", "b": "eth0"}, "netem", "no network device known for c"),
        (ADDR, DEV, "delay", "unknown netem mode"),
    ],
)
def test_bad_input_is_a_user_error(addresses, devices, mode, message):
    with pytest.raises(UserError, match=message):
        build_plan(latency_map_from_dict(MAP), addresses, devices, mode)
