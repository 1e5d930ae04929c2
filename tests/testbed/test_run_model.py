"""`gesscale run --model FILE`: the live controller starts from a calibrated model (issue 9), wired without Spark.

The LiveController runs here on the simulator backend (the same Backend interface as the testbed's), so the
tests are fast and exact: with the model, the first eligible decision at low input is a model-based scale-down;
without it, the controller has no model and cannot scale down. A fitted model in a resumed controller state wins
over the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.model import Measurement, PerformanceModel
from gesscale.model_file import load_model_file
from gesscale.probe import SimProbeTarget, calibrate, configurations
from gesscale.scenario import Scenario, scenario_from_dict
from gesscale.sim_backend import SimBackend
from gesscale.simulate import controller_config
from gesscale.testbed.controller import LiveController

ROOT = Path(__file__).resolve().parents[2]


class _SimLive(SimBackend):
    """The simulator with the two extras the live controller reads from the local backend."""

    strategy = "sim"

    def now_s(self) -> float:
        return float(self.t)


def _scenario() -> Scenario:
    return scenario_from_dict({
        "name": "low-input",
        "control_period_s": 30,
        "cluster": {"latency_map": str(ROOT / "inventory/latency/pi10.yaml"), "max_replicas": 8},
        "operator": {"alpha": 60, "beta": 0.9, "gamma": 0.1, "noise": 0.03, "reconfig_pause_s": 60,
                     "initial_replicas": 4},
        "workload": {"kind": "steps", "levels": [50], "step_s": 900},
    })


def _model_file(sc: Scenario, path: Path) -> Path:
    cal = calibrate(SimProbeTarget(sc.truth, sc.latency_map), sc.latency_map,
                    configurations(sc.latency_map, [1, 2, 3], ["near", "far"]))
    path.write_text(json.dumps(cal.to_dict()))
    return path


def _controller(sc: Scenario, state: Path, model: PerformanceModel | None) -> LiveController:
    return LiveController(_SimLive(sc, seed=1), "gesscale", sc.latency_map, controller_config(sc, 1), state, [],
                          initial_model=model)


def test_a_controller_started_with_the_model_scales_down_at_its_first_decision(tmp_path: Path) -> None:
    sc = _scenario()
    model = load_model_file(_model_file(sc, tmp_path / "model.json"))
    ctl = _controller(sc, tmp_path / "with" / "controller.json", model)
    assert ctl.model_from == "file"
    first = ctl.loop.step()  # the very first period: no reconfiguration yet, so no warm-up either
    assert first.observation.n == 4
    assert first.decision.remove, first.decision.reason
    assert first.decision.reason.startswith("DT=") and first.applied
    assert first.reconfiguration is not None and first.reconfiguration.kind == "down"

    without = _controller(sc, tmp_path / "without" / "controller.json", None)
    assert without.model_from == ""
    for _ in range(5):
        rec = without.loop.step()
        assert not rec.decision.remove and not rec.applied, rec.decision.reason
    assert not without.policy.model.is_fitted


def test_a_fitted_model_in_the_resumed_state_wins_over_the_file(tmp_path: Path) -> None:
    sc = _scenario()
    model = load_model_file(_model_file(sc, tmp_path / "model.json"))
    state = tmp_path / "controller.json"
    saved = PerformanceModel().fit([Measurement(1, 0.0, 7.0)])
    state.write_text(json.dumps({"policy": "gesscale", "policy_state": {"model": saved.to_dict()}}))
    ctl = _controller(sc, state, model)
    assert ctl.model_from == "state"
    assert ctl.policy.model.alpha_ == pytest.approx(7.0)

    # A state whose model never saw a measurement (a run without one) does not erase the file's model.
    state.write_text(json.dumps({"policy": "gesscale", "policy_state": {"model": PerformanceModel().to_dict()}}))
    ctl = _controller(sc, state, model)
    assert ctl.model_from == "file"
    assert ctl.policy.model.alpha_ == pytest.approx(model.alpha_)


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "--model", "{missing}"], "model file not found"),
    (["run", "--model", "{model}", "--policy", "thr-nlaware"], "has no performance model"),
])
def test_model_flag_mistakes_are_user_errors(argv: list[str], message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.json"
    model.write_text(json.dumps(PerformanceModel().fit([Measurement(1, 0.0, 50.0)]).to_dict()))
    argv = [a.format(missing=tmp_path / "none.json", model=model) for a in argv]
    assert main([*argv, "--run-dir", str(tmp_path / "run"), "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "run").exists()
