"""The MAPE loop's resume rule used by the live controller: a change the dead controller made but did not record
counts as done when the backend shows it (warm-up from its time), and is planned again when it does not."""

from __future__ import annotations

import json
from pathlib import Path

from gesscale.mape import ControlLoop
from gesscale.policies.base import make_policy
from gesscale.scenario import load_scenario
from gesscale.sim_backend import SimBackend
from gesscale.simulate import controller_config

ROOT = Path(__file__).resolve().parents[2]


def _loop(state: Path) -> tuple[ControlLoop, SimBackend]:
    sc = load_scenario(ROOT / "scenarios" / "pi10-taxi.yaml")
    backend = SimBackend(sc, seed=1)
    loop = ControlLoop(backend, make_policy("gesscale"), sc.latency_map, controller_config(sc, 1), state_path=state)
    return loop, backend


def _write_state(state: Path, pending_nodes: list[str], time_s: float) -> None:
    doc = {"policy": "gesscale", "policy_state": {}, "last_reconfig_s": 10.0,
           "pending": {"nodes": pending_nodes, "nd_max_ms": 0.0, "time_s": time_s}}
    state.write_text(json.dumps(doc))


def test_a_change_already_effective_is_not_made_again(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    _, backend = _loop(tmp_path / "probe.json")
    _write_state(state, list(backend.current().nodes), 123.0)
    loop, _ = _loop(state)
    assert loop.last_reconfig_s == 123.0
    assert json.loads(state.read_text())["pending"] is None


def test_a_change_that_never_took_effect_is_planned_again(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    _, backend = _loop(tmp_path / "probe.json")
    other = [n for n in backend.scenario.latency_map.names if n not in backend.current().nodes][:1]
    _write_state(state, list(backend.current().nodes) + other, 123.0)
    loop, _ = _loop(state)
    assert loop.last_reconfig_s == 10.0
