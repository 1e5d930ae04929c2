"""`gesscale experiment run`: the spec is read strictly and the bundle holds what the docs list."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.experiment.bundle import DECISION_COLUMNS
from gesscale.experiment.spec import spec_from_dict
from gesscale.simulate import TIMESERIES_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
BASE = {"scenario": "scenarios/pi10-spike.yaml", "policies": ["gesscale"]}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(("extra", "message"), [
    ({"environment": "k8s"}, "environment 'k8s' is not built yet"),
    ({"environment": "local"}, "'scenario' is not taken by environment: local"),
    ({"local": {"day_s": 100}}, "'local' is for environment: local"),
    ({"environment": "cloud"}, "'environment' must be one of sim, local, k8s"),
    ({"seed": 3}, "unknown key 'seed'"),
    ({"policies": []}, "'policies' must be a non-empty list"),
    ({"policies": ["nosuch"]}, "unknown policy 'nosuch'"),
    ({"seeds": 0}, "'seeds' must be"),
    ({"controller": {"warmup": 1}}, "controller: unknown key 'warmup'"),
    ({"policy_options": {"static": {"replicas": 2}}}, "'static' is not among the policies"),
    ({"policy_options": {"gesscale": {"nosuch": 2}}}, "policy_options: gesscale:"),
    # the same declaration as the command line's (gesscale.options): values are checked, not only names
    ({"controller": {"warmup_s": -5}}, r"controller: 'warmup_s' must be in \[0, 86400\], got -5"),
    ({"controller": {"warmup_s": "soon"}}, "controller: 'warmup_s': 'soon' is not a duration"),
    ({"controller": {"min_replicas": 2}}, "controller: unknown key 'min_replicas'"),
    ({"controller": {"latency_source": "ping"}}, "controller: 'latency_source' must be one of map, measured, both"),
    ({"scenario": "nosuch.yaml"}, "'scenario': file not found"),
])
def test_spec_mistakes_are_one_line(extra: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        spec_from_dict({**BASE, **extra}, "exp.yaml", ROOT)


def test_local_spec_is_checked_before_anything_starts() -> None:
    spec = spec_from_dict({"environment": "local", "policies": ["gesscale", "mdl-nlunaware"],
                           "local": {"day_s": 150, "nodes": 4}, "sim_policies": ["gesscale", "thr-nlaware"]},
                          "exp.yaml", ROOT)
    assert spec.scenario_path is None and spec.local == {"day_s": 150, "nodes": 4}
    assert spec.sim_policies == ("gesscale", "thr-nlaware")
    with pytest.raises(UserError, match="local: unknown key 'days'"):
        spec_from_dict({"environment": "local", "policies": ["gesscale"], "local": {"days": 1}}, "exp.yaml", ROOT)
    with pytest.raises(UserError, match=r"exp.yaml: local: 'nodes' must be in \[1, 9\], got 12"):
        spec_from_dict({"environment": "local", "policies": ["gesscale"], "local": {"nodes": 12}}, "exp.yaml", ROOT)


def test_cli_refuses_the_k8s_environment_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "exp.yaml"
    spec.write_text(f"environment: k8s\nscenario: {ROOT / 'scenarios/pi10-spike.yaml'}\npolicies: [gesscale]\n")
    r = subprocess.run([sys.executable, "-m", "gesscale", "experiment", "run", str(spec), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not built yet" in r.stderr, r.stderr


def test_bundle_holds_every_listed_file(bundle: Path) -> None:
    files = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file())
    for name in ("spec.yaml", "spec.resolved.json", "environment.json", "network.json", "decisions.csv",
                 "metrics.json", "figures/figure7.png", "figures/model-vs-observed.png", "table3.md", "report.html",
                 "timeseries/gesscale-seed1.csv", "timeseries/thr-nlaware-seed1.csv",
                 "timeseries/optimal-seed1.csv", "timeseries/ideal-seed1.csv"):
        assert name in files


def test_bundle_records_provenance_and_the_spec_as_run(bundle: Path) -> None:
    env = json.loads((bundle / "environment.json").read_text())
    assert len(env["git"]["commit"]) == 40 and env["packages"]["numpy"]
    assert len(env["input"]["rate_sha256_by_seed"]["1"]) == 64
    assert env["input"]["provenance"] == "synthetic spike profile"
    resolved = json.loads((bundle / "spec.resolved.json").read_text())
    assert resolved["scenario"]["workload"]["duration_s"] == 7200 and resolved["controller"] == {"warmup_s": 180}
    net = json.loads((bundle / "network.json").read_text())
    assert "pi01" in json.dumps(net["configured"]) and net["measured"] is None


def test_time_series_and_decision_log(bundle: Path) -> None:
    ts = _rows(bundle / "timeseries/gesscale-seed1.csv")
    assert list(ts[0]) == list(TIMESERIES_COLUMNS) and len(ts) >= 7200 // 60
    metrics = json.loads((bundle / "metrics.json").read_text())
    assert sum(int(r["applied"]) for r in ts) == metrics["policies"]["gesscale"]["reconfigurations"]
    log = _rows(bundle / "decisions.csv")
    assert list(log[0]) == list(DECISION_COLUMNS)
    compared = [r for r in log if r["policy"] == "gesscale" and r["predicted_mst"] and r["observed_mst"]]
    assert compared and all(r["saturated"] == "1" for r in compared)
    assert not any(r["predicted_mst"] for r in log if r["policy"] == "thr-nlaware")  # no model, no prediction


def test_a_model_without_a_model_based_policy_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.json"
    model.write_text('{"model": {"alpha": 60, "beta": 0.9, "gamma": 0.1, "measurements": []}}')
    with pytest.raises(UserError, match="'model': none of the policies thr-nlaware has a performance model"):
        spec_from_dict({**BASE, "policies": ["thr-nlaware"], "model": str(model)}, "exp.yaml", ROOT)


@pytest.mark.parametrize("name", ["../../x", "a\nb", "a/b"])
def test_an_experiment_name_outside_the_name_rule_is_refused(tmp_path: Path, name: str) -> None:
    from gesscale.errors import UserError
    from gesscale.experiment.spec import spec_from_dict

    data = {"name": name, "environment": "sim", "scenario": str(ROOT / "scenarios/pi10-spike.yaml"),
            "policies": ["static"], "seeds": 1}
    with pytest.raises(UserError, match="not a valid experiment name") as err:
        spec_from_dict(data, "exp.yaml", tmp_path)
    assert "\n" not in str(err.value)
