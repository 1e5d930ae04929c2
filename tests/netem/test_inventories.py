"""The shipped inventories and their latency maps agree: same hosts, addresses usable by tc, same sites."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gesscale.latency_map import load_latency_map
from netem.hosts import hosts_for_map, load_inventory
from netem.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["pi10", "local"])
def test_inventory_matches_its_latency_map(name):
    lmap = load_latency_map(ROOT / "inventory" / "latency" / f"{name}.yaml")
    hosts = hosts_for_map(load_inventory(ROOT / "inventory" / name), lmap)
    assert list(hosts) == lmap.names
    raw = yaml.safe_load((ROOT / "inventory" / name / "hosts.yml").read_text())["all"]["hosts"]
    for node in lmap.nodes.values():
        assert raw[node.name]["region"] == node.region
        assert raw[node.name]["latitude"] == pytest.approx(node.lat)
        assert raw[node.name]["longitude"] == pytest.approx(node.lon)
    plans = build_plan(lmap, {n: h.address for n, h in hosts.items()}, {n: "eth0" for n in hosts})
    assert all(len(p.rules) == len(lmap.names) - 1 for p in plans.values())
    assert lmap.warnings == []
