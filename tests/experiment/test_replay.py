"""`gesscale experiment replay`: a simulator bundle reproduces, and a changed metric or input is reported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.experiment.bundle import run_experiment
from gesscale.experiment.replay import check_replay, compare_runs, input_mismatches, spec_of_bundle


def test_compare_runs_names_what_changed() -> None:
    a = [{"policy": "p", "seed": 1, "cost": 10.0, "drained": True}, {"policy": "q", "seed": 1, "cost": 5.0}]
    assert compare_runs(a, [dict(r) for r in a]) == []
    b = [{"policy": "p", "seed": 1, "cost": 11.0, "drained": True}]
    assert compare_runs(a, b) == ["p seed 1: cost 10.0 -> 11.0", "q seed 1: not replayed"]
    assert input_mismatches({"1": "aa", "2": "bb"}, {"1": "aa", "2": "cc"}) == ["2"]


def test_a_bundle_replays_identically(bundle: Path, tmp_path: Path) -> None:
    spec = spec_of_bundle(bundle)
    assert spec.policies == ("gesscale", "thr-nlaware") and spec.seeds == 1
    run_experiment(spec, tmp_path / "replay", ["test"])
    assert check_replay(bundle, tmp_path / "replay") == ([], [])


def test_a_non_bundle_or_a_live_bundle_is_refused(bundle: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not an experiment bundle"):
        spec_of_bundle(tmp_path)
    live = tmp_path / "live"
    shutil.copytree(bundle, live)
    doc = json.loads((live / "spec.resolved.json").read_text())
    (live / "spec.resolved.json").write_text(json.dumps({**doc, "environment": "local"}))
    with pytest.raises(UserError, match="cannot be replayed yet"):
        spec_of_bundle(live)


def test_a_bundle_replays_with_its_events(bundle: Path, tmp_path: Path) -> None:
    copy = tmp_path / "events"
    shutil.copytree(bundle, copy)
    doc = json.loads((copy / "spec.resolved.json").read_text())
    crash = {"t_s": 60, "event": "crash", "node": "pi03"}
    (copy / "spec.resolved.json").write_text(json.dumps({**doc, "events": [crash]}))
    assert spec_of_bundle(copy).events == (crash,)
    (copy / "spec.resolved.json").write_text(json.dumps({**doc, "events": {"t_s": 1}}))
    with pytest.raises(UserError, match="'events' is not a list"):
        spec_of_bundle(copy)
