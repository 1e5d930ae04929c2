"""The shipped scenarios: one per seed workload, same cluster and ground truth, demand spanning 1..8."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gesscale.scenario import load_scenario
from gesscale.sim_backend import SimBackend

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("taxi", "cosine", "random", "increasing", "decreasing", "spike", "steps")


def _all() -> list[Path]:
    return sorted((ROOT / "scenarios").glob("pi10-*.yaml"))


def test_one_scenario_per_workload_kind() -> None:
    kinds = {load_scenario(p).workload["kind"] for p in _all()}
    assert set(KINDS) <= kinds


@pytest.mark.parametrize("path", _all(), ids=lambda p: p.stem)
def test_same_cluster_and_ground_truth_as_taxi(path: Path) -> None:
    ref = load_scenario(ROOT / "scenarios" / "pi10-taxi.yaml")
    sc = load_scenario(path)
    assert sc.truth == ref.truth
    assert sc.latency_map.names == ref.latency_map.names
    assert (sc.min_replicas, sc.max_replicas, sc.control_period_s) == (1, 8, 60.0)


@pytest.mark.parametrize("path", _all(), ids=lambda p: p.stem)
def test_demand_spans_most_of_the_cluster(path: Path) -> None:
    demand = SimBackend(load_scenario(path)).demand()
    # Every workload needs at most 3 replicas at its low and at least 6 at its peak (taxi peaks at 6).
    assert demand.min() <= 3
    assert demand.max() >= 6
    assert np.all((demand >= 1) & (demand <= 8))
