"""Latency maps: loading, derivation from coordinates, validation errors naming the pair."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.latency_map import geo_rtt_ms, great_circle_km, latency_map_from_dict, load_latency_map

ROOT = Path(__file__).resolve().parents[1]


def test_pi10_map_has_ten_nodes_and_rtts_up_to_300ms() -> None:
    m = load_latency_map(ROOT / "inventory/latency/pi10.yaml")
    assert len(m.names) == 10
    values = list(m.rtts.values())
    assert len(values) == 45 and min(values) > 0 and max(values) <= 300
    g = m.graph()
    assert g.number_of_edges() == 45 and g["pi01"]["pi02"]["weight"] == m.rtt("pi01", "pi02")


def test_one_direction_is_enough_and_both_must_agree() -> None:
    m = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"b": {"a": 12}}})
    assert m.rtt("a", "b") == 12 == m.rtt("b", "a")
    m = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 12}, "b": {"a": 12.5}}})
    assert m.rtt("a", "b") == 12.25
    with pytest.raises(UserError, match=r"pair \(a, b\) is asymmetric"):
        latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 12}, "b": {"a": 20}}})


def test_missing_pair_is_an_error_unless_default_or_geo() -> None:
    data = {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 20}}}
    with pytest.raises(UserError, match=r"missing RTT for pair \(b, c\)"):
        latency_map_from_dict(data)
    assert latency_map_from_dict({**data, "default_rtt_ms": 50}).rtt("b", "c") == 50


@pytest.mark.parametrize(("value", "message"), [(-3, "must not be negative"), ("fast", "must be a number")])
def test_bad_values_name_the_pair(value: object, message: str) -> None:
    with pytest.raises(UserError, match=rf"pair \(a, b\).*{message}"):
        latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": value}}})


def test_unknown_node_is_named() -> None:
    with pytest.raises(UserError, match="unknown node 'zz'"):
        latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"zz": 3, "b": 4}}})


def test_geo_derivation_follows_the_fibre_model() -> None:
    nodes = {"paris": {"lat": 48.8566, "lon": 2.3522}, "london": {"lat": 51.5074, "lon": -0.1278}}
    m = latency_map_from_dict({"nodes": nodes, "derive": "geo"})
    km = great_circle_km(48.8566, 2.3522, 51.5074, -0.1278)
    assert 340 < km < 345  # Paris-London great circle ≈ 344 km
    assert m.rtt("paris", "london") == pytest.approx(1.0 + 2 * km * 1.5 / 200, abs=1e-3)
    m2 = latency_map_from_dict({"nodes": nodes, "derive": "geo", "geo": {"stretch": 2.0, "base_ms": 0}})
    assert m2.rtt("paris", "london") == pytest.approx(2 * km * 2.0 / 200, abs=1e-3)


def test_geo_needs_coordinates() -> None:
    with pytest.raises(UserError, match="has no lat/lon"):
        latency_map_from_dict({"nodes": {"a": {}, "b": {"lat": 1, "lon": 1}}, "derive": "geo"})
    from gesscale.latency_map import Node
    assert geo_rtt_ms(Node("x", lat=0, lon=0), Node("x", lat=0, lon=0)) == 0.0


def test_triangle_violation_is_a_warning() -> None:
    m = latency_map_from_dict({"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 100, "c": 10}, "b": {"c": 10}}})
    assert any("triangle" in w and "(a, b)" in w for w in m.warnings)


def test_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [a, b\nrtt_ms: {")
    with pytest.raises(UserError, match="malformed YAML"):
        load_latency_map(bad)
    with pytest.raises(UserError, match="not found"):
        load_latency_map(tmp_path / "none.yaml")


def test_a_key_repeated_in_a_mapping_is_an_error(tmp_path: Path) -> None:
    dup = tmp_path / "dup.yaml"
    dup.write_text("nodes: [a, b]\nrtt_ms:\n  a: {b: 10}\n  a: {b: 90}\n")
    with pytest.raises(UserError, match=rf"^{re.escape(str(dup))}: duplicate key 'a' at line 4"):
        load_latency_map(dup)
    dup.write_text("nodes: [a, b]\nrtt_ms: {a: {b: 10, b: 12}}\n")
    with pytest.raises(UserError, match="duplicate key 'b' at line 2"):
        load_latency_map(dup)
    # A YAML merge may still be overridden: that is what merges are for.
    merged = tmp_path / "merged.yaml"
    merged.write_text("nodes: [a, b]\nrtt_ms: {a: {b: 10}}\nlink_defaults: &d {jitter_ms: 1, loss_pct: 1}\n"
                      "links: {a: {b: {<<: *d, loss_pct: 2}}}\n")
    link = load_latency_map(merged).link("a", "b")
    assert (link.jitter_ms, link.loss_pct) == (1, 2)


def test_binary_file_is_a_clear_error(tmp_path: Path) -> None:
    blob = tmp_path / "map.yaml"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(UserError, match="not a text file"):
        load_latency_map(blob)


def test_a_map_above_the_stated_limit_is_refused_with_one_line_giving_the_memory_it_would_take() -> None:
    from gesscale.latency_map import MAX_NODES

    assert MAX_NODES >= 50_000  # issue 31: the former 2 000-node limit is gone
    n = MAX_NODES + 1
    doc = {"nodes": [f"n{i}" for i in range(n)], "default_rtt_ms": 10}
    with pytest.raises(UserError, match=rf"^huge.yaml: {n} nodes; at most {MAX_NODES} are supported \(this map "
                                        r"would take about 40.2 GB in memory, 205 MB derived from coordinates\)$"):
        latency_map_from_dict(doc, "huge.yaml")


def test_the_testbed_map_says_its_delays_are_emulated() -> None:
    """fog9.yaml's header says how its RTTs reach the testbed (the userspace engine), not that none is emulated."""
    from pathlib import Path

    header = "".join(line for line in (Path(__file__).parents[1] / "inventory/latency/fog9.yaml").read_text()
                     .splitlines(keepends=True) if line.startswith("#")).replace("\n#", "")
    assert "no delay is emulated" not in header and "userspace delay engine" in header and "--wan" in header


def test_a_10000_node_geo_map_loads() -> None:
    doc = {"nodes": {f"n{i}": {"lat": 50.0 + i * 1e-4, "lon": 10.0} for i in range(10_000)}, "derive": "geo"}
    m = latency_map_from_dict(doc, "big.yaml")
    assert len(m.rtts) == 10_000 * 9_999 // 2 and m.rtt("n0", "n1") == 1.0  # 11 m apart: the base delay
