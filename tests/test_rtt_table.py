"""RTT storage in numpy: the values are exactly those of the scalar formulas, and memory grows as stated."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

from gesscale.errors import UserError
from gesscale.latency_map import geo_rtt_ms, latency_map_from_dict, load_latency_map, write_rtt_matrix
from gesscale.rtt_table import DenseRtts, GeoRtts


def _geo_doc(n: int, seed: int = 3) -> dict:
    rnd = random.Random(seed)
    nodes = {f"n{i}": {"lat": round(rnd.uniform(-60, 70), 4), "lon": round(rnd.uniform(-180, 180), 4)}
             for i in range(n)}
    return {"nodes": nodes, "derive": "geo"}


def test_derived_rows_equal_the_scalar_fibre_model_rounded_to_the_microsecond() -> None:
    doc = _geo_doc(400)
    m = latency_map_from_dict(doc, "geo")
    assert isinstance(m.rtts, GeoRtts)
    nodes = list(m.nodes.values())
    for i in range(0, 400, 7):
        row = m.row(i)
        for j in range(400):
            assert row[j] == round(geo_rtt_ms(nodes[i], nodes[j]), 3), (i, j)
    some = m.names[::13]
    block = m.block(some)
    assert all(block[a, b] == m.rtt(x, y) for a, x in enumerate(some) for b, y in enumerate(some))


def test_a_value_on_a_half_microsecond_is_rounded_as_python_rounds() -> None:
    # base 0.0005 ms and two nodes at the same place: 0.5 us exactly, which Python rounds to even (0.0)
    doc = {"nodes": {"a": {"lat": 1, "lon": 1}, "b": {"lat": 1, "lon": 1}, "c": {"lat": 2, "lon": 1}},
           "derive": "geo", "geo": {"base_ms": 0.0005}}
    m = latency_map_from_dict(doc)
    assert m.rtt("a", "b") == round(0.0005, 3) == m.row(0)[1]


def test_given_pairs_override_derived_ones_in_rows_blocks_and_lookups() -> None:
    doc = {**_geo_doc(30), "rtt_ms": {"n3": {"n7": 99.5}}}
    m = latency_map_from_dict(doc)
    assert m.rtt("n7", "n3") == 99.5 == m.row(3)[7] == m.row(7)[3] == m.block(["n3", "n7"])[0, 1]
    assert m.rtts.measured() == [(3, 7)]


def test_a_listed_map_is_one_int32_matrix_when_every_rtt_is_whole_microseconds() -> None:
    m = latency_map_from_dict({"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 1.25, "c": 3}, "b": {"c": 2.001}}})
    assert isinstance(m.rtts, DenseRtts) and m.rtts.matrix.dtype == np.int32
    assert (m.rtt("a", "b"), m.rtt("b", "c")) == (1.25, 2.001)
    finer = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 1.00005}}})
    assert finer.rtts.matrix.dtype == np.float64 and finer.rtt("a", "b") == 1.00005


def test_a_10000_node_dense_map_takes_4_bytes_per_pair() -> None:
    n = 10_000
    m = latency_map_from_dict({"nodes": [f"n{i}" for i in range(n)], "default_rtt_ms": 20})
    assert sys.getsizeof(m.rtts) < 4 * n * n * 1.01


def test_rtt_matrix_file_is_memory_mapped_and_gives_the_same_map(tmp_path: Path) -> None:
    src = latency_map_from_dict(_geo_doc(50))
    write_rtt_matrix(src, tmp_path / "m.npy")
    names = src.names
    (tmp_path / "map.yaml").write_text("nodes: [" + ", ".join(names) + "]\nrtt_matrix: m.npy\n")
    m = load_latency_map(tmp_path / "map.yaml")
    assert isinstance(m.rtts.matrix, np.memmap)
    assert all(m.rtt(a, b) == src.rtt(a, b) for a in names for b in names)


def test_rtt_matrix_errors_name_the_file_and_the_pair(tmp_path: Path) -> None:
    bad = np.array([[0, 10, 5], [12, 0, 5], [5, 5, 0]], dtype=np.int32) * 1000
    np.save(tmp_path / "m.npy", bad)
    with pytest.raises(UserError, match=r"pair \(a, b\) is asymmetric: 10.0 ms vs 12.0 ms"):
        latency_map_from_dict({"nodes": ["a", "b", "c"], "rtt_matrix": "m.npy"}, "x.yaml", base_dir=tmp_path)
    with pytest.raises(UserError, match=r"expected 2x2"):
        latency_map_from_dict({"nodes": ["a", "b"], "rtt_matrix": "m.npy"}, "x.yaml", base_dir=tmp_path)
    with pytest.raises(UserError, match="not found"):
        latency_map_from_dict({"nodes": ["a", "b"], "rtt_matrix": "none.npy"}, "x.yaml", base_dir=tmp_path)


def test_triangle_check_above_the_full_size_looks_at_measured_pairs_and_states_its_sample() -> None:
    doc = {**_geo_doc(400), "rtt_ms": {"n0": {"n1": 9000.0}}}
    m = latency_map_from_dict(doc)
    assert any("pair (n0, n1) = 9000 ms exceeds the path via" in w for w in m.warnings)
    dense = latency_map_from_dict({"nodes": [f"n{i}" for i in range(400)], "default_rtt_ms": 10,
                                   "rtt_ms": {"n5": {"n9": 30}}})
    assert [w for w in dense.warnings if "triangle" in w] == [
        "<inline>: pair (n5, n9) = 30 ms exceeds the path via n0 (20 ms): triangle inequality violated"]
    listed = latency_map_from_dict(latency_map_from_dict(_geo_doc(400)).to_dict(), "listed")
    assert any("seeded sample of 5000 of the 79800 measured pairs" in w for w in listed.warnings)


def test_a_large_map_is_recorded_by_what_it_states_and_the_rows_of_the_used_nodes() -> None:
    doc = {**_geo_doc(400), "rtt_ms": {"n3": {"n7": 99.5}},
           "changes": [{"t_s": 10, "node": "n5", "add_rtt_ms": 4}]}
    m = latency_map_from_dict(doc)
    rec = m.to_record(["n9", "n2"])
    assert rec["derive"] == "geo" and rec["rtt_ms"] == {"n3": {"n7": 99.5}} and len(rec["changes"]) == 1
    assert list(rec["rows"]) == ["n2", "n9"] and len(rec["rows"]["n2"]) == 400
    assert rec["rows"]["n2"][9] == m.rtt("n2", "n9")
    assert m.at(10).to_record(["n5"])["rows"]["n5"][0] == m.rtt("n5", "n0") + 4
    small = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 3}}})
    assert small.to_record(["a"]) == small.to_dict()
