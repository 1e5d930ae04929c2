"""`gesscale scenarios generate`: within the stated ranges, every kind, reproducible, and feasible: the input
averaged over a control period never exceeds what n_max replicas on the best placement sustain."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gesscale import placement
from gesscale.cli import main
from gesscale.scenario import load_scenario, scenario_from_dict
from gesscale.scenario_gen import KINDS, generate
from gesscale.workloads import rate_profile


def test_scenarios_are_in_range_of_every_kind_and_their_peak_is_sustainable() -> None:
    drawn = generate(21, seed=11)
    assert {doc["workload"]["kind"] for doc, _ in drawn} == set(KINDS)
    for doc, _ in drawn:
        sc = scenario_from_dict(doc, doc["name"])
        assert 5 <= len(sc.latency_map.names) <= 30
        assert 30 <= sc.truth.reconfig_pause_s <= 240 and 0.7 <= sc.truth.beta <= 1.0
        assert 3 <= sc.max_replicas <= min(12, len(sc.latency_map.names))
        nds = placement.best_nd_max_by_size(sc.latency_map.graph(), sc.latency_map.names, sc.max_replicas)
        capacity = sc.truth.mst(sc.max_replicas, nds[sc.max_replicas])
        assert capacity >= 1.5 * sc.truth.mst(1, nds[1])
        rate = rate_profile(sc.workload, seed=sc.seed)
        assert 1.5 * 3600 <= len(rate) <= 5 * 3600
        period = int(sc.control_period_s)
        smooth = np.convolve(rate, np.ones(period) / period, mode="valid")
        assert smooth.max() <= capacity, (doc["name"], smooth.max(), capacity)


def test_the_same_seed_gives_the_same_scenarios_and_another_seed_others() -> None:
    assert generate(5, seed=3) == generate(5, seed=3)
    assert generate(5, seed=3) != generate(5, seed=4)


def test_cli_writes_loadable_files(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    assert main(["scenarios", "generate", "--count", "7", "--seed", "2", "--out", str(out)]) == 0
    files = sorted(out.glob("*.yaml"))
    assert len(files) == 7
    assert {load_scenario(f).workload["kind"] for f in files} == set(KINDS)


def test_a_generated_fog_is_clustered_and_its_peak_needs_at_least_32_replicas() -> None:
    from gesscale.scenario import scenario_from_dict
    from gesscale.scenario_gen import generate_fog
    from gesscale.sim_backend import SimBackend

    doc, note = generate_fog(500, 3)
    assert doc == generate_fog(500, 3)[0]  # seeded
    sc = scenario_from_dict(doc, doc["name"])
    assert len(sc.latency_map.names) == 500 and sc.max_replicas == 64
    regions = {}
    for site in doc["cluster"]["nodes"].values():
        regions[site["region"]] = regions.get(site["region"], 0) + 1
    assert max(regions.values()) > 4 * 500 / len(regions)  # a few large metros hold most sites
    demand = SimBackend(sc).demand()
    assert demand.max() >= 32 and "needs 40 replicas" in note
