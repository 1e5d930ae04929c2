"""A bundle holds only itself: its manifest lists exactly the files the run wrote (with their SHA-256), a run into
a non-empty folder refuses, and `--force` removes only what the previous bundle's manifest lists."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.experiment.bundle import run_experiment
from gesscale.experiment.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def _on_disk(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_the_manifest_lists_exactly_the_files_written_with_their_hashes(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["format"] == 2 and manifest["kind"] == "run"
    assert set(manifest["files"]) | {"manifest.json"} == _on_disk(bundle)
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((bundle / name).read_bytes()).hexdigest() == digest, name
    # the inputs travel with the bundle, byte for byte
    scenario = manifest["inputs"]["scenario"]
    assert scenario["file"] == "inputs/scenario.yaml"
    assert (bundle / scenario["file"]).read_bytes() == (ROOT / "scenarios/pi10-spike.yaml").read_bytes()
    assert (bundle / manifest["inputs"]["scenario_latency_map"]["file"]).read_bytes() == \
        (ROOT / "inventory/latency/pi10.yaml").read_bytes()


def _listed(folder: Path) -> list[str]:
    section = (folder / "report.html").read_text().split("<h2>Files of this bundle</h2>", 1)[1]
    return re.findall(r"<li><code>([^<]+)</code></li>", section)


def test_the_report_lists_the_bundle_once_and_nothing_else(bundle: Path) -> None:
    listed = _listed(bundle)
    assert len(listed) == len(set(listed)) and set(listed) == _on_disk(bundle)


def _spec(tmp_path: Path) -> Path:
    from tests.experiment.conftest import SPEC

    spec = tmp_path / "exp.yaml"
    spec.write_text(SPEC.replace("duration_s: 7200", "duration_s: 3600"))
    return spec


def test_a_run_into_a_non_empty_folder_refuses_and_force_clears_only_what_the_bundle_owns(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    out = tmp_path / "b"
    out.mkdir()
    (out / "mine.txt").write_text("a note of mine")
    with pytest.raises(UserError, match="is not empty"):
        run_experiment(spec, out, ["t"])
    with pytest.raises(UserError, match="1 file.s. no bundle manifest lists .e.g. 'mine.txt'"):
        run_experiment(spec, out, ["t"], force=True)
    assert (out / "mine.txt").read_text() == "a note of mine"
    (out / "mine.txt").unlink()
    run_experiment(spec, out, ["t"])
    # a file the old bundle wrote that the new one does not write is gone; a nested replay bundle is kept
    (out / "timeseries" / "stale.csv").write_text("x")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["timeseries/stale.csv"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(manifest))
    shutil.copytree(out, tmp_path / "nested")
    shutil.move(tmp_path / "nested", out / "replay")
    run_experiment(spec, out, ["t"], force=True)
    assert not (out / "timeseries" / "stale.csv").exists()
    listed = _listed(out)  # a second run into the folder: no stale file, and report.html once
    assert len(listed) == len(set(listed)) and set(listed) == set(json.loads((out / "manifest.json").read_text())
                                                                  ["files"]) | {"manifest.json"}
    assert (out / "replay" / "manifest.json").is_file()
    assert set(json.loads((out / "manifest.json").read_text())["files"]) | {"manifest.json"} == \
        _on_disk(out) - {p for p in _on_disk(out) if p.startswith("replay/")}


def test_force_never_removes_a_file_outside_the_bundle(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    out = tmp_path / "b"
    run_experiment(spec, out, ["t"])
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["../victim.txt"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="leads outside the bundle"):
        run_experiment(spec, out, ["t"], force=True)
    assert victim.read_text() == "keep me"


def test_cli_second_run_without_force_is_one_line(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    out = tmp_path / "b"
    argv = [sys.executable, "-m", "gesscale", "experiment", "run", str(spec), "--out", str(out)]
    assert subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120).returncode == 0
    again = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "--force" in again.stderr, again.stderr
    forced = subprocess.run([*argv, "--force"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert forced.returncode == 0, forced.stderr


def test_a_run_cut_short_lists_what_it_wrote_so_that_force_can_clear_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import gesscale.experiment.html

    spec = load_spec(_spec(tmp_path))
    out = tmp_path / "b"

    def cut(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(gesscale.experiment.html, "write_report", cut)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(spec, out, ["t"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "run (incomplete)" and set(manifest["files"]) | {"manifest.json"} == _on_disk(out)
    run_experiment(spec, out, ["t"], force=True)
    assert json.loads((out / "manifest.json").read_text())["kind"] == "run"


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "", "line\nbreak"])
def test_a_file_named_after_a_name_stays_in_its_folder(tmp_path: Path, name: str) -> None:
    from gesscale.experiment.manifest import named

    with pytest.raises(UserError, match="is not a file name"):
        named(tmp_path, "timeseries", name)
    assert named(tmp_path, "timeseries", "gesscale-seed1.csv") == tmp_path.resolve() / "timeseries/gesscale-seed1.csv"


def test_a_plug_in_whose_id_climbs_out_writes_nothing_outside(tmp_path: Path) -> None:
    plugin = tmp_path / "climb.py"
    plugin.write_text("from gesscale.observation import Decision\nfrom gesscale.policies.base import Policy\n\n\n"
                      "class Climb(Policy):\n    id = '../../escape'\n    summary = 'x'\n\n"
                      "    def decide(self, obs, ctx):\n        return Decision(obs.n, 'stay')\n")
    spec = _spec(tmp_path)
    spec.write_text(spec.read_text().replace("policies: [gesscale, thr-nlaware]", f"policies: ['{plugin}:Climb']"))
    r = subprocess.run([sys.executable, "-m", "gesscale", "experiment", "run", str(spec), "--out",
                        str(tmp_path / "a" / "b")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    refused = "is not a file name" in r.stderr or "is not a valid policy name" in r.stderr  # the names rule first
    assert r.returncode == 2 and refused and r.stderr.count("\n") == 1, r.stderr
    assert not list(tmp_path.rglob("*escape*"))
