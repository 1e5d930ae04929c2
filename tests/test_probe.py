"""Capacity probe on the simulator with known ground truth (issue 9, simulator part)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.model_file import load_model_file
from gesscale.probe import ProbeParams, SimProbeTarget, calibrate, configurations, measure_mst
from gesscale.scenario import load_scenario, scenario_from_dict
from gesscale.simulate import run_once

ROOT = Path(__file__).resolve().parents[1]
SC = load_scenario(ROOT / "scenarios" / "pi10-taxi.yaml")


def test_probe_measures_each_configuration_within_3pct_and_predicts_holdout_within_5pct() -> None:
    configs = configurations(SC.latency_map, [1, 2, 3, 4, 6], ["near", "far"])
    assert len(configs) == 9  # n = 1 has no far variant
    cal = calibrate(SimProbeTarget(SC.truth, SC.latency_map, seed=5), SC.latency_map, configs)
    for r in cal.results:
        true = SC.truth.mst(r.n, r.nd_max_ms)
        assert r.mst == pytest.approx(true, rel=0.03), (r.nodes, r.mst, true)
        assert 0 < r.spread < 0.5
    assert cal.holdout is not None and cal.holdout["n"] == 6
    assert abs(cal.holdout["error"]) < 0.05
    assert cal.model.n_params_ == 3


def test_dichotomy_converges_to_the_capacity_without_noise() -> None:
    truth = SC.truth.__class__(alpha=50, beta=1.0, gamma=0.0, noise=0.0)
    target = SimProbeTarget(truth, SC.latency_map)
    r = measure_mst(target, ("pi01", "pi02"), 1.0, ProbeParams(precision=0.001))
    assert r.mst == pytest.approx(100.0, rel=0.002)
    assert all(s["rate"] <= 100.0 * 1.001 for s in r.steps if s["ok"])   # no overload is accepted
    assert any(not s["ok"] for s in r.steps) and any(s["ok"] for s in r.steps)


class _Guessing(SimProbeTarget):
    """Offers a guess of the MST and searches up to 1.3 x the guess (as the live target does with the saturated
    throughput it measured)."""

    def __init__(self, *args: object, factor: float) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.factor = factor

    def expected_mst(self, nodes: tuple[str, ...]) -> float:
        return self.factor * self.truth.mst(len(nodes), self.lmap.nd_max(nodes))

    def upper_bound(self, nodes: tuple[str, ...]) -> float:
        return 1.3 * self.expected_mst(nodes)


@pytest.mark.parametrize("factor", [1.0, 0.9, 1.2, 1.5])
def test_a_guess_only_steers_the_search_never_the_result(factor: float) -> None:
    # factor 1.5: the whole bracket [1.05, 1.95] x MST around the guess is above the MST.
    truth = SC.truth.__class__(alpha=50, beta=1.0, gamma=0.0, noise=0.0)
    params = ProbeParams(precision=0.01)
    plain = measure_mst(SimProbeTarget(truth, SC.latency_map), ("pi01", "pi02"), 1.0, params)
    guided = measure_mst(_Guessing(truth, SC.latency_map, factor=factor), ("pi01", "pi02"), 1.0, params)
    assert guided.mst == pytest.approx(100.0, rel=0.011)
    assert all(s["rate"] <= 100.0 * 1.001 for s in guided.steps if s["ok"])
    assert guided.steps[0]["rate"] == pytest.approx(factor * 100.0)
    if factor <= 1.2:
        assert len(guided.steps) < len(plain.steps)
    if factor > 1.0:  # the first rate overloaded the operator: the next one is just below what it processed
        assert guided.steps[1]["rate"] == pytest.approx(guided.steps[0]["processed"] * 0.99, rel=1e-6)


def test_controller_with_a_calibrated_model_scales_down_without_first_scaling_up(tmp_path: Path) -> None:
    sc = scenario_from_dict({
        "name": "down",
        "cluster": {"latency_map": str(ROOT / "inventory/latency/pi10.yaml"), "max_replicas": 8},
        "operator": {"alpha": 60, "beta": 0.9, "gamma": 0.1, "noise": 0.03, "reconfig_pause_s": 120,
                     "initial_replicas": 6},
        "workload": {"kind": "steps", "levels": [100], "step_s": 1800},
    })
    cal = calibrate(SimProbeTarget(sc.truth, sc.latency_map), sc.latency_map,
                    configurations(sc.latency_map, [1, 2, 3, 4], ["near", "far"]))
    path = tmp_path / "model.json"
    path.write_text(json.dumps(cal.to_dict()))
    with_model = run_once(sc, "gesscale", 1, keep_history=True, initial_model=load_model_file(path))
    first = next(h for h in with_model.history if h.applied)
    assert first.reconfiguration is not None and first.reconfiguration.kind == "down"
    assert first.observation.time_s <= 240  # the first decision after the warm-up
    without = run_once(sc, "gesscale", 1, keep_history=True)
    assert not any(h.applied for h in without.history)  # no measurement, no model: it cannot scale down


def test_model_file_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_model_file(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\"hello\": 1}")
    with pytest.raises(UserError, match="not a model file"):
        load_model_file(bad)


def test_calibrate_cli_writes_the_model(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    r = subprocess.run([sys.executable, "-m", "gesscale", "calibrate", "--replicas", "1,2,3,4", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert len(doc["measurements"]) == 7 and doc["holdout"]["n"] == 4
    assert "held-out" in r.stdout
    form = doc["model"]["form"]  # the fit's line ends on the form's own formula with the fitted numbers
    assert f"fit: form {form} " in r.stdout and f"{doc['model']['alpha']:.1f}·n^" in r.stdout.split(": MST = ")[1]
    r = subprocess.run([sys.executable, "-m", "gesscale", "calibrate", "--backend", "nowhere"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "not available" in r.stderr


def test_a_search_that_never_failed_reports_a_lower_bound() -> None:
    truth = SC.truth.__class__(alpha=50, beta=1.0, gamma=0.0, noise=0.0)

    class LowBound(SimProbeTarget):
        def upper_bound(self, nodes: tuple[str, ...]) -> float:
            return 80.0  # below the true MST of 100: a wrong "surely above"

    low = measure_mst(LowBound(truth, SC.latency_map), ("pi01", "pi02"), 1.0, ProbeParams(max_steps=6))
    assert all(s["ok"] for s in low.steps) and len(low.steps) == 6  # it kept climbing instead of stopping
    assert not low.bounded and 75.0 < low.mst < 80.0
    assert measure_mst(SimProbeTarget(truth, SC.latency_map), ("pi01", "pi02"), 1.0).bounded


def test_calibrate_measures_a_censored_search_again_with_a_higher_top() -> None:
    """A search whose every rate held (its top below the true MST) is measured again from what held, up to twice
    the top: the fitted point is the bracketed MST, not the lower bound (issue 30: none censored)."""
    truth = SC.truth.__class__(alpha=50, beta=1.0, gamma=0.0, noise=0.0)

    class LowBound(SimProbeTarget):
        def upper_bound(self, nodes: tuple[str, ...]) -> float:
            return 80.0  # below the true MST of 100: the first search cannot fail

    params = ProbeParams(max_steps=6, precision=0.02)
    cal = calibrate(LowBound(truth, SC.latency_map), SC.latency_map, [("pi01", "pi02")], params)
    (r,) = cal.results
    assert r.bounded and r.remeasured_from is not None and 75.0 < r.remeasured_from < 80.0
    assert r.mst == pytest.approx(100.0, rel=0.03) and r.upper_bound == 160.0
    first = r.steps[:6]  # both searches' steps are kept, the first's first
    assert all(s["ok"] for s in first) and all(s["rate"] > r.remeasured_from for s in r.steps[6:])  # none below
    once = calibrate(LowBound(truth, SC.latency_map), SC.latency_map, [("pi01", "pi02")],
                     ProbeParams(max_steps=6, precision=0.02, measure_again=False))  # --no-measure-again
    assert not once.results[0].bounded and once.results[0].remeasured_from is None


def test_calibrate_searches_again_a_bracket_the_steps_left_wider_than_the_precision() -> None:
    """Live, a rate that failed just within `tolerance` sends the search back to [0, rate]: with 3 steps it ended
    at 218/s below a failed 435/s (n = 1 on rhine6, 2026-11-27). The bracket is searched again from its bottom."""
    from gesscale.probe import unconverged_top

    truth = SC.truth.__class__(alpha=37, beta=1.0, gamma=0.0, noise=0.0)  # MST 74: 100 fails, 50 holds
    params = ProbeParams(max_steps=2, precision=0.05, tolerance=0.5)  # a failure within tolerance: no narrowing

    class Top200(SimProbeTarget):
        def upper_bound(self, nodes: tuple[str, ...]) -> float:
            return 200.0

    first = measure_mst(Top200(truth, SC.latency_map), ("pi01", "pi02"), 1.0, params)
    top = unconverged_top(first, params)
    assert first.bounded and top is not None and (top - first.mst) / top > 0.05  # what calibrate used to keep
    cal = calibrate(Top200(truth, SC.latency_map), SC.latency_map, [("pi01", "pi02")], params)
    (r,) = cal.results
    assert r.remeasured_from == first.mst == 50.0 and top == 100.0 and 50.0 < r.mst <= 80.0  # MST 74
    assert r.steps[: len(first.steps)] == first.steps  # both searches' trace, the first's first
    assert all(first.mst < s["rate"] < top for s in r.steps[len(first.steps):])  # only inside the bracket left open
    assert r.upper_bound == top and r.mst < r.upper_bound
    assert unconverged_top(measure_mst(SimProbeTarget(truth, SC.latency_map), ("pi01", "pi02"), 1.0), params) is None


def test_a_measurement_where_the_injector_fell_short_is_marked_machine_limited() -> None:
    """The live target records what actually arrived per second; a step that got clearly less than the rate set
    means the machine, not the operator, was the bottleneck, and the file says so."""
    from gesscale.probe import ProbeResult

    def result(injected: float) -> ProbeResult:
        steps = [{"rate": 800.0, "processed": 795.0, "growth": 0.0, "ok": 1.0, "injected": 799.0},
                 {"rate": 959.0, "processed": 900.0, "growth": 444.0, "ok": 0.0, "injected": injected}]  # fmt: skip
        return ProbeResult(("fog5",), 1, 0.0, 800.0, 0.05, steps)

    assert result(930.0).machine_limited and result(930.0).to_dict()["machine_limited"] is True
    assert not result(940.0).machine_limited  # within 3% of the rate: the injector kept up
    assert not ProbeResult(("fog5",), 1, 0.0, 800.0, 0.05, [{"rate": 900.0, "ok": 1.0}]).machine_limited  # sim


def test_the_held_out_configuration_leaves_out_every_repeat_of_it() -> None:
    """Measured twice, the held-out configuration's second measurement must not be among the points fitted."""
    configs = configurations(SC.latency_map, [1, 2, 3], ["near", "far"])
    params = ProbeParams(warmup_s=5, cooldown_s=5, inject_s=10, observe_s=20, precision=0.02)
    cal = calibrate(SimProbeTarget(SC.truth, SC.latency_map, seed=3), SC.latency_map, configs * 2, params,
                    form="paper")
    far3 = [r for r in cal.results if r.n == 3 and r.nd_max_ms == max(x.nd_max_ms for x in cal.results)]
    assert len(far3) == 2 and far3[0].mst != far3[1].mst
    assert cal.holdout["measured"] == pytest.approx((far3[0].mst + far3[1].mst) / 2)
    assert cal.holdout["form"] == "paper"
