"""`gesscale experiment replay` of a live bundle: each live run's simulated twin beside its live figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.experiment.replay import is_live_bundle, replay_live
from gesscale.latency_map import load_latency_map
from gesscale.twin import build_twin

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PERIODS = [json.loads(line) for line in (DATA / "live_demo_periods.jsonl").read_text().splitlines()]
RECONFIGURATIONS = [json.loads(line) for line in (DATA / "live_demo_reconfigurations.jsonl").read_text().splitlines()]
MODEL = {"fitted": True, "alpha": 300.0, "beta": 0.8, "gamma": 1.0,
         "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 310.0, "predicted": 300.0},
                          {"n": 2, "nd_max_ms": 8.7, "mst": 500.0, "predicted": 513.0}]}


def _live_bundle(tmp_path: Path, with_scenario: bool = True, with_report: bool = False) -> Path:
    """A live bundle of one run, the recorded demo of tests/data (its twin as run_demo records it; with
    `with_report`, also the demo's report.json that replay builds the twin from again)."""
    lmap = load_latency_map(ROOT / "inventory" / "latency" / "fog9.yaml").subset(["fog1", "fog2", "fog3"])
    scenario, _ = build_twin(PERIODS, RECONFIGURATIONS, MODEL, lmap.to_dict(), 3, 10.0, 5.0)
    live = {"produced": 60_000, "processed": 60_000, "lost": 0, "duplicated": 0, "reconfigurations": 3,
            "avg_replicas": 1.7, "max_backlog": 9000}
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "spec.resolved.json").write_text(json.dumps({"environment": "local", "sim_policies": ["ideal"]}))
    run = {"live": live, **({"calibrated_scenario": scenario} if with_scenario else {})}
    (bundle / "metrics.json").write_text(json.dumps({"environment": "local", "runs": {"gesscale": run}}))
    (bundle / "manifest.json").write_text(json.dumps({"format": 2, "kind": "live", "files": {}, "inputs": {}}))
    if with_report:
        replicas = [p | {"replicas": ["fog1", "fog2"][: 2 if 109.5 < p["time_s"] < 191.5 else 1],
                         "decision": "recorded"} for p in PERIODS]
        (bundle / "live" / "gesscale").mkdir(parents=True)
        (bundle / "live" / "gesscale" / "report.json").write_text(json.dumps(
            {"periods": replicas, "reconfigurations": RECONFIGURATIONS, "model": MODEL, "latency": {"p95_s": 9.5},
             "options": {"control_period_s": 5.0}}))
    return bundle


def test_a_live_bundle_replays_as_the_simulated_twin_of_each_run(tmp_path: Path) -> None:
    bundle = _live_bundle(tmp_path)
    assert is_live_bundle(bundle)
    doc = replay_live(bundle, ["thr-nlaware"], tmp_path / "replay", seeds=1)
    twin = doc["twins"]["gesscale"]
    assert twin["live"]["reconfigurations"] == 3
    assert set(twin["simulated"]) == {"gesscale", "ideal", "thr-nlaware"}  # its policy, sim_policies, the extra
    assert all(m["cost"] > 0 for m in twin["simulated"].values())
    table = (tmp_path / "replay" / "twins.md").read_text()
    assert "| gesscale | **live** | 3 |" in table and "| gesscale | simulated thr-nlaware |" in table
    assert json.loads((tmp_path / "replay" / "metrics.json").read_text())["twins"]["gesscale"]["live"] == twin["live"]
    manifest = json.loads((tmp_path / "replay" / "manifest.json").read_text())  # the replay's own file list
    assert manifest["kind"] == "live-replay" and set(manifest["files"]) == {"metrics.json", "twins.md", "fidelity.md"}
    assert twin["twin"] is None and "no report.json" in (tmp_path / "replay" / "fidelity.md").read_text()


def test_with_its_report_a_live_run_is_replayed_on_the_twin_of_its_measurements(tmp_path: Path) -> None:
    doc = replay_live(_live_bundle(tmp_path, with_report=True), [], tmp_path / "replay", seeds=1)
    twin = doc["twins"]["gesscale"]
    assert twin["twin"]["by_kind"]["up"]["effective_s"] == 40.9  # effective_s - started_s of the recorded up-scale
    assert twin["observed"]["reconfigurations"] == 2 and twin["observed"]["p95_latency_s"] == 9.5
    rows = {r["key"]: r for r in twin["fidelity"]}
    assert rows["reconfigurations"]["twin"] == twin["simulated"]["gesscale"]["reconfigurations"]
    assert rows["replica_minutes"]["live"] == pytest.approx(twin["observed"]["replica_minutes"])
    assert "| reconfigurations | 2 |" in (tmp_path / "replay" / "fidelity.md").read_text()


def test_a_live_run_without_its_calibrated_scenario_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no calibrated scenario"):
        replay_live(_live_bundle(tmp_path, with_scenario=False), [], tmp_path / "replay", seeds=1)


def test_a_live_bundle_runs_no_code_and_reads_no_file_it_names(tmp_path: Path) -> None:
    bundle = _live_bundle(tmp_path)
    evil = tmp_path / "evil.py"
    evil.write_text("from pathlib import Path\nPath(__file__).with_name('ran').write_text('x')\n")
    (bundle / "spec.resolved.json").write_text(json.dumps({"environment": "local", "sim_policies": [f"{evil}:C"]}))
    with pytest.raises(UserError, match="is not a built-in policy"):
        replay_live(bundle, [], tmp_path / "replay", seeds=1)
    assert not (tmp_path / "ran").exists()
    (bundle / "spec.resolved.json").write_text(json.dumps({"environment": "local", "sim_policies": []}))
    metrics = json.loads((bundle / "metrics.json").read_text())
    metrics["runs"]["gesscale"]["calibrated_scenario"]["cluster"] = {"latency_map": "/etc/passwd"}
    (bundle / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(UserError, match="names a file .'/etc/passwd'. outside the bundle; .* --allow-outside"):
        replay_live(bundle, [], tmp_path / "replay", seeds=1)
    (bundle / "manifest.json").unlink()
    with pytest.raises(UserError, match="written before bundles carried their inputs"):
        replay_live(bundle, [], tmp_path / "replay", seeds=1)
