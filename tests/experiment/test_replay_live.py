"""`gesscale experiment replay` of a live bundle: each live run's simulated twin beside its live figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.experiment.replay import is_live_bundle, replay_live
from gesscale.latency_map import load_latency_map
from gesscale.testbed.demo import DemoOptions
from gesscale.testbed.report import calibrated_scenario

ROOT = Path(__file__).resolve().parents[2]


def _live_bundle(tmp_path: Path, with_scenario: bool = True) -> Path:
    model = {"fitted": True, "alpha": 300.0, "beta": 0.8, "gamma": 1.0,
             "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 310.0, "predicted": 300.0},
                              {"n": 2, "nd_max_ms": 8.7, "mst": 500.0, "predicted": 513.0}]}
    lmap = load_latency_map(ROOT / "inventory" / "latency" / "fog9.yaml").subset(["fog1", "fog2", "fog3"])
    scenario = calibrated_scenario(model, [], [12.0], lmap, DemoOptions(day_s=150, rides_per_day=20_000).workload(),
                                   10.0, 10.0, 3)
    live = {"produced": 60_000, "processed": 60_000, "lost": 0, "duplicated": 0, "reconfigurations": 3,
            "avg_replicas": 1.7, "max_backlog": 9000}
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "spec.resolved.json").write_text(json.dumps({"environment": "local", "sim_policies": ["ideal"]}))
    run = {"live": live, **({"calibrated_scenario": scenario} if with_scenario else {})}
    (bundle / "metrics.json").write_text(json.dumps({"environment": "local", "runs": {"gesscale": run}}))
    (bundle / "manifest.json").write_text(json.dumps({"format": 2, "kind": "live", "files": {}, "inputs": {}}))
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
    assert manifest["kind"] == "live-replay" and set(manifest["files"]) == {"metrics.json", "twins.md"}


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
