"""`experiment replay` reads the bundle and nothing else, and runs no code from it unless told to: the copies of
the inputs (checked by SHA-256) instead of the original paths, no plug-in loaded without --trust-code, no path
outside the bundle without --allow-outside, and bundles from before manifests refused with one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.experiment.bundle import run_experiment
from gesscale.experiment.replay import check_replay, spec_of_bundle

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = """
import math
from pathlib import Path

from gesscale.observation import Decision
from gesscale.policies.base import Policy

Path(__file__).with_name("imported.marker").write_text("the plug-in's code ran")


class PerRate(Policy):
    id = "per-rate-replay"
    summary = "one replica per 50 records/s"
    latency_aware = True

    def decide(self, obs, ctx):
        if ctx.in_warmup:
            return Decision(obs.n, "warm-up")
        return Decision(ctx.clamp(math.ceil(max(obs.input_rate, 1.0) / 50.0)), "rate")
"""


def _copy(bundle: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(bundle, out)
    return out


def _edit(path: Path, **changes: object) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def test_replay_reads_the_carried_inputs_not_the_paths_the_bundle_names(bundle: Path, tmp_path: Path) -> None:
    copy = _copy(bundle, tmp_path)
    # the recorded paths point elsewhere (a moved checkout, or a crafted bundle): they are never read
    _edit(copy / "spec.resolved.json", scenario_path="/etc/passwd", latency_map="/etc/passwd", model="/etc/passwd")
    spec = spec_of_bundle(copy)
    assert spec.scenario_path == copy / "inputs" / "scenario.yaml"
    assert spec.latency_map == copy / "inputs" / "scenario_latency_map.yaml" and spec.model is None
    run_experiment(spec, tmp_path / "replay", ["t"], kind="replay")
    assert check_replay(copy, tmp_path / "replay") == ([], [])
    replay_manifest = json.loads((tmp_path / "replay" / "manifest.json").read_text())
    assert replay_manifest["kind"] == "replay" and "metrics.json" in replay_manifest["files"]


def test_a_changed_input_copy_or_one_outside_the_bundle_is_refused(bundle: Path, tmp_path: Path) -> None:
    copy = _copy(bundle, tmp_path)
    (copy / "inputs" / "scenario.yaml").write_text((copy / "inputs" / "scenario.yaml").read_text() + "\n# edited\n")
    with pytest.raises(UserError, match="input scenario: inputs/scenario.yaml does not have the SHA-256"):
        spec_of_bundle(copy)
    secret = tmp_path / "secret.yaml"
    secret.write_text("not yours\n")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["inputs"]["scenario"]["file"] = "../secret.yaml"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match=r"outside the bundle; replay follows it only with --allow-outside"):
        spec_of_bundle(copy)
    with pytest.raises(UserError, match="does not have the SHA-256"):  # followed, then checked
        spec_of_bundle(copy, allow_outside=True)
    # a link inside inputs/ that leads out is outside too
    manifest["inputs"]["scenario"]["file"] = "inputs/scenario.yaml"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "inputs" / "scenario.yaml").unlink()
    (copy / "inputs" / "scenario.yaml").symlink_to(secret)
    with pytest.raises(UserError, match="outside the bundle"):
        spec_of_bundle(copy)


def test_a_bundle_from_before_manifests_is_refused_with_how_to_replay_it(bundle: Path, tmp_path: Path) -> None:
    copy = _copy(bundle, tmp_path)
    (copy / "manifest.json").unlink()
    with pytest.raises(UserError, match=r"written before bundles carried their inputs .*\(gesscale experiment run "):
        spec_of_bundle(copy)


def test_a_policy_file_named_by_a_bundle_is_never_imported(bundle: Path, tmp_path: Path) -> None:
    copy = _copy(bundle, tmp_path)
    evil = tmp_path / "evil.py"
    evil.write_text(PLUGIN)
    _edit(copy / "spec.resolved.json", policies=["gesscale", f"{evil}:PerRate"])
    with pytest.raises(UserError, match="is neither a built-in policy nor a plug-in the bundle carries"):
        spec_of_bundle(copy, trust_code=True)
    assert not (tmp_path / "imported.marker").exists()


def _gesscale(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gesscale", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=180)


def test_a_carried_plug_in_runs_only_with_trust_code(tmp_path: Path) -> None:
    plugin = tmp_path / "src" / "my_policy.py"
    plugin.parent.mkdir()
    plugin.write_text(PLUGIN)
    spec = tmp_path / "exp.yaml"
    spec.write_text(f"scenario: {ROOT / 'scenarios/pi10-spike.yaml'}\n"
                    "workload: {kind: spike, base: 120, peak: 340, at_s: 1800, width_s: 1800, duration_s: 3600}\n"
                    f"policies: [gesscale, '{plugin}:PerRate']\n")
    out = tmp_path / "b"
    made = _gesscale("experiment", "run", str(spec), "--out", str(out), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"]["plugin:per-rate-replay"]["class"] == "PerRate"
    copy = out / manifest["inputs"]["plugin:per-rate-replay"]["file"]
    shutil.rmtree(plugin.parent)  # the original is gone: the replay has only the bundle's copy
    refused = _gesscale("experiment", "replay", str(out), cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "replay runs no code from a bundle unless --trust-code" in refused.stderr
    assert not (copy.parent / "imported.marker").exists() and not (out / "replay").exists()
    trusted = _gesscale("experiment", "replay", str(out), "--trust-code", cwd=tmp_path)
    assert trusted.returncode == 0, trusted.stderr
    assert "reproduced" in trusted.stdout and (copy.parent / "imported.marker").is_file()
