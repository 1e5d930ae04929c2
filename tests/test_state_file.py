"""The controller's state file: damaged or foreign state is reported or kept beside, never lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.state_file import beside, read_state, reset_state, state_for

GOOD = {"policy": "gesscale", "policy_state": {"model": {"measurements": [{"n": 1, "nd_max_ms": 0, "mst": 9}]}},
        "last_reconfig_s": 12.5, "pending": None, "rng": None}


def _write(path: Path, doc: object) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.mark.parametrize(("content", "message"), [
    ('{"policy": "gesscale", "policy_st', "is not JSON"),
    ("\x00\x01garbage", "is not JSON"),
    ("[1, 2]", "no policy named"),
    ({"policy": "gesscale", "colour": 1}, "unknown keys colour"),
    ({"policy": "gesscale", "last_reconfig_s": float("nan")}, "last_reconfig_s must be a finite"),
    ({"policy": "gesscale", "last_reconfig_s": "soon"}, "last_reconfig_s must be a finite"),
    ({"policy": "gesscale", "pending": {"nodes": "fog1"}}, "pending must be a mapping"),
    ({"policy": "gesscale", "pending": {"nodes": ["fog1"], "time_s": float("inf")}}, "pending.time_s"),
])
def test_a_damaged_state_is_one_clear_error(tmp_path: Path, content: object, message: str) -> None:
    path = _write(tmp_path / "controller.json", content)
    with pytest.raises(UserError, match=message) as err:
        read_state(path)
    assert str(path) in str(err.value) and "--reset-state" in str(err.value)
    assert path.exists()  # nothing is removed on the way


def test_a_good_state_reads_back_and_none_is_none(tmp_path: Path) -> None:
    assert read_state(_write(tmp_path / "c.json", GOOD)) == GOOD
    assert read_state(tmp_path / "missing.json") is None


def test_another_policys_state_is_kept_beside_and_resumed_when_switching_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "controller.json", GOOD)
    state, note = state_for(path, "mdl-nlunaware")
    assert state is None and "kept as" in note
    assert json.loads(beside(path, "gesscale").read_text()) == GOOD
    _write(path, {"policy": "mdl-nlunaware", "policy_state": {"x": 1}})  # the other policy ran and saved
    state, note = state_for(path, "gesscale")
    assert state == GOOD and "resuming gesscale" in note
    assert json.loads(beside(path, "mdl-nlunaware").read_text())["policy_state"] == {"x": 1}


def test_reset_moves_the_state_aside(tmp_path: Path) -> None:
    path = _write(tmp_path / "controller.json", GOOD)
    kept = reset_state(path)
    assert kept is not None and not path.exists() and json.loads(kept.read_text()) == GOOD
    assert reset_state(path) is None


def test_run_reports_a_damaged_state_before_it_starts_anything(tmp_path: Path) -> None:
    bad = _write(tmp_path / "controller.json", '{"policy": "gesscale", "last_reconfig_s": NaN}')
    res = subprocess.run([sys.executable, "-m", "gesscale", "run", "--state", str(bad), "--run-dir",
                          str(tmp_path / "tb"), "--no-view"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "last_reconfig_s must be a finite" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "tb").exists()  # no testbed was brought up
