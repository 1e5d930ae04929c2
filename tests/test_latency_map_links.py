"""Link properties and changes over time in the latency map: schema, defaults vs overrides, `at(t)`, round trip."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from gesscale.errors import UserError
from gesscale.latency_map import Link, latency_map_from_dict, load_latency_map
from tests.docs_blocks import blocks_of

ROOT = Path(__file__).resolve().parents[1]

BASE = """
nodes: [a, b, c]
rtt_ms: {a: {b: 10, c: 20}, b: {c: 30}}
"""

MAP = {
    "nodes": ["a", "b", "c"],
    "rtt_ms": {"a": {"b": 10, "c": 20}, "b": {"c": 30}},
    "link_defaults": {"jitter_ms": 1, "loss_pct": 0.5},
    "links": {"b": {"a": {"jitter_ms": 2, "bandwidth_mbit": 100}}},
    "changes": [
        {"t_s": 100, "node": "c", "add_rtt_ms": 50, "loss_pct": 5},
        {"t_s": 200, "pair": ["a", "b"], "rtt_ms": 4, "bandwidth_mbit": None},
    ],
}


def test_defaults_apply_to_every_pair_and_overrides_to_theirs() -> None:
    m = latency_map_from_dict(MAP)
    assert m.link("a", "b") == Link(10.0, 2.0, 0.5, 100.0) == m.link("b", "a")
    assert m.link("a", "c") == Link(20.0, 1.0, 0.5, None)
    assert m.link("b", "b") == Link(0.0)
    plain = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 7}}})
    assert plain.link("a", "b") == Link(7.0) and not plain.has_link_properties
    assert m.has_link_properties


def test_at_applies_the_changes_up_to_t_and_nd_max_follows() -> None:
    m = latency_map_from_dict(MAP)
    assert m.change_times == [100.0, 200.0]
    assert m.at(0) is m and m.at(99.9) is m
    assert m.nd_max("abc") == 30
    at100 = m.at(100)
    assert at100.link("a", "c") == Link(70.0, 1.0, 5.0, None)
    assert at100.rtt("b", "c") == 80 and at100.nd_max("abc") == 80 and at100.nd_max("ab") == 10
    assert at100.time_s == 100 and at100.at(150) is at100  # one object per set of changes in force
    late = m.at(10_000)
    assert late.link("a", "b") == Link(4.0, 2.0, 0.5, None)  # bandwidth limit lifted, jitter kept
    assert late.at(0) is m  # the schedule is shared: any map of it answers for any time
    assert m.rtt("a", "c") == 20  # the map as written is untouched
    assert late.graph()["a"]["c"]["weight"] == 70


def test_changes_at_the_same_time_apply_in_order() -> None:
    m = latency_map_from_dict({**MAP, "changes": [
        {"t_s": 50, "node": "a", "rtt_ms": 40},
        {"t_s": 50, "pair": ["a", "b"], "add_rtt_ms": -35},
    ]})
    assert m.change_times == [50.0]
    assert m.at(50).rtt("a", "b") == 5 and m.at(50).rtt("a", "c") == 40


def test_to_dict_round_trips_everything(tmp_path: Path) -> None:
    m = latency_map_from_dict(MAP)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(m.to_dict()))
    back = load_latency_map(path)
    for t in (0, 100, 200):
        for a, b in (("a", "b"), ("a", "c"), ("b", "c")):
            assert back.at(t).link(a, b) == m.at(t).link(a, b)
    assert back.change_times == m.change_times
    # A map taken at t writes its values in force and only the changes still to come.
    mid = latency_map_from_dict(m.at(100).to_dict())
    assert mid.link("a", "c") == m.at(100).link("a", "c") and mid.change_times == [200.0]
    assert mid.at(200).link("a", "b") == m.at(200).link("a", "b")


def test_subset_keeps_the_properties_and_the_changes_of_its_nodes() -> None:
    sub = latency_map_from_dict(MAP).subset(["a", "b"])
    assert sub.link("a", "b") == Link(10.0, 2.0, 0.5, 100.0)
    assert sub.change_times == [200.0]  # the change of node c concerns a node left out
    assert sub.at(200).rtt("a", "b") == 4


def test_sparse_storage_for_large_maps() -> None:
    n = 300
    names = [f"n{i}" for i in range(n)]
    m = latency_map_from_dict({"nodes": names, "default_rtt_ms": 20, "link_defaults": {"jitter_ms": 2},
                               "changes": [{"t_s": 10, "node": "n7", "add_rtt_ms": 100}]})
    assert len(m.rtts) == n * (n - 1) // 2
    assert m.links == {} and m.rtt_changed == {}  # defaults cost nothing per pair
    later = m.at(10)
    assert later.rtts is m.rtts and len(later.rtt_changed) == n - 1  # a node's change: one entry per peer
    assert later.rtt("n7", "n200") == 120 and later.rtt("n1", "n200") == 20
    assert sys.getsizeof(later.rtt_changed) < sys.getsizeof(m.rtts) / 50


def test_shipped_degraded_map_is_pi10_derived_plus_a_change() -> None:
    pi10 = load_latency_map(ROOT / "inventory/latency/pi10.yaml")
    deg = load_latency_map(ROOT / "inventory/latency/pi10-degraded.yaml")
    assert deg.names == pi10.names and deg.change_times == [4320.0]
    for a in pi10.names:
        for b in pi10.names:
            assert deg.rtt(a, b) == pytest.approx(pi10.rtt(a, b), abs=0.06)
    assert deg.at(4320).rtt("pi03", "pi04") == pytest.approx(pi10.rtt("pi03", "pi04") + 150, abs=0.06)
    assert deg.at(4320).link("pi03", "pi05").loss_pct == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("link_defaults: {loss_pct: 120}", r"link_defaults: loss_pct must be in \[0, 100\], got 120"),
        ("link_defaults: {jitter_ms: -1}", r"link_defaults: jitter_ms must not be negative, got -1"),
        ("link_defaults: {jitter_ms: .nan}", r"link_defaults: jitter_ms must be finite, got nan"),
        ("link_defaults: {bandwidth_mbit: .inf}", r"link_defaults: bandwidth_mbit must be finite"),
        ("link_defaults: {bandwidth_mbit: 0}", r"bandwidth_mbit must be > 0 \(or null for no limit\), got 0"),
        ("link_defaults: {bandwith_mbit: 10}", r"link_defaults: unknown key 'bandwith_mbit'"),
        ("link_defaults: {jitter_ms: 6}", r"pair \(a, b\): link_defaults.jitter_ms 6 exceeds half its RTT \(10 ms\)"),
        ("links: {a: {b: {jitter_ms: 5.5}}}", r"links: pair \(a, b\): jitter_ms 5.5 exceeds half the RTT"),
        ("links: {a: {b: {loss_pct: '5%'}}}", r"links pair \(a, b\): loss_pct must be a number, got '5%'"),
        ("links: {a: {z: {loss_pct: 1}}}", r"links pair \(a, z\): unknown node 'z'"),
        ("links: {z: {a: {loss_pct: 1}}}", r"links names unknown node 'z'"),
        ("links: {a: {a: {loss_pct: 1}}}", r"links pair \(a, a\): a node has no link to itself"),
        ("links: {a: {b: {rtt_ms: 3}}}", r"links pair \(a, b\): unknown key 'rtt_ms'"),
        ("links: {a: {b: {loss_pct: 1}}, b: {a: {loss_pct: 2}}}", r"loss_pct listed in both directions"),
        ("rtt_ms_typo: 3", r"unknown key 'rtt_ms_typo'"),
        ("nodes: {a: {regoin: x}, b: {}, c: {}}", r"node 'a': unknown key 'regoin'"),
        ("changes: [{t_s: -5, node: a, rtt_ms: 1}]", r"changes\[0\]: t_s must not be negative"),
        ("changes: [{t_s: .nan, node: a, rtt_ms: 1}]", r"changes\[0\]: t_s must be a finite number"),
        ("changes: [{node: a, rtt_ms: 1}]", r"changes\[0\]: missing t_s"),
        ("changes: [{t_s: 9, node: a, rtt_ms: 1}, {t_s: 5, pair: [b, c], rtt_ms: 1}]",
         r"changes\[1\] \(t_s 5, pair \(b, c\)\): out of time order \(changes\[0\] is at t_s 9\)"),
        ("changes: [{t_s: 1, node: q, rtt_ms: 1}]", r"changes\[0\] \(t_s 1, node q\): unknown node 'q'"),
        ("changes: [{t_s: 1, pair: [a, q], rtt_ms: 1}]", r"\(t_s 1, pair \(a, q\)\): unknown node 'q'"),
        ("changes: [{t_s: 1, pair: [a], rtt_ms: 1}]", r"pair must be a list of two nodes"),
        ("changes: [{t_s: 1, node: a, pair: [a, b], rtt_ms: 1}]", r"either node .* or pair"),
        ("changes: [{t_s: 1, node: a}]", r"\(t_s 1, node a\): no new value"),
        ("changes: [{t_s: 1, node: a, rtt: 4}]", r"changes\[0\]: unknown key 'rtt'"),
        ("changes: [{t_s: 1, node: a, rtt_ms: 4, add_rtt_ms: 3}]", r"rtt_ms .* or add_rtt_ms .*, not both"),
        ("changes: [{t_s: 1, pair: [a, b], loss_pct: 101}]", r"\(t_s 1, pair \(a, b\)\): loss_pct must be in"),
        ("changes: [{t_s: 1, pair: [a, b], rtt_ms: -1}]", r"\(t_s 1, pair \(a, b\)\): rtt_ms must not be negative"),
        ("changes: [{t_s: 1, pair: [a, b], add_rtt_ms: -11}]",
         r"changes\[0\] at t_s 1: pair \(a, b\): add_rtt_ms -11 makes the RTT negative"),
        ("changes: [{t_s: 1, node: c, jitter_ms: 11}]",
         r"changes\[0\] at t_s 1: pair \(a, c\): jitter_ms 11 exceeds half the RTT \(20 ms\)"),
        ("link_defaults: {jitter_ms: 2}\nchanges: [{t_s: 1, pair: [a, b], rtt_ms: 3}]",
         r"changes\[0\] at t_s 1: pair \(a, b\): jitter_ms 2 exceeds half the RTT \(3 ms\)"),
        ("changes: {t_s: 1}", r"'changes' must be a list"),
    ],
)
def test_each_bad_input_is_one_line_naming_file_and_pair(tmp_path: Path, extra: str, message: str) -> None:
    text = BASE + extra + "\n"
    if extra.startswith("nodes:"):
        text = text.replace("nodes: [a, b, c]\n", "")
    path = tmp_path / "map.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_latency_map(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(path)), line
    assert re.search(message, line), line


def test_jitter_at_exactly_half_the_rtt_is_allowed() -> None:
    m = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 10}}, "link_defaults": {"jitter_ms": 5}})
    assert m.link("a", "b").jitter_ms == 5


def test_scenario_inline_cluster_still_takes_its_own_keys_and_rejects_typos() -> None:
    from gesscale.scenario import scenario_from_dict

    doc = {"cluster": {"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 5}}, "max_replicas": 2},
           "workload": {"kind": "steps", "levels": [10], "step_s": 60}}
    assert scenario_from_dict(doc).max_replicas == 2
    doc["cluster"]["max_replica"] = 2
    with pytest.raises(UserError, match="cluster: unknown key 'max_replica'"):
        scenario_from_dict(doc)


def test_the_documented_example_loads_and_means_what_the_doc_says() -> None:
    block = next(b for b in blocks_of(ROOT / "docs" / "pi-cluster.md") if b.detail == "latency-map")
    m = latency_map_from_dict(yaml.safe_load(block.body), "doc")
    assert m.link("pi01", "pi03") == Link(8.7, 2.0, 0.5, 100.0)
    assert m.link("pi01", "pi02") == Link(1.0, 0.5)
    assert m.at(4320).link("pi02", "pi03") == Link(158.7, 5.0, 1.0)
    assert m.at(9000).link("pi01", "pi03") == Link(12.0, 5.0, 1.0, None)
