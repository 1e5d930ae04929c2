"""`--query` from each command's line to the job it starts: `demo`, `run --backend local` and `calibrate --backend
local` hand the value to the testbed's `JobSettings` (a file made absolute), and the job's command line carries it;
a bad value is one line, exit 2, before anything starts. The testbed itself is not brought up: the test stops at
the call that would bring it up, once it has the settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from gesscale.testbed import job as testbed_job

QUERY_FILE = "def build(rides):\n    return rides.select('partition', 'key', 'value')\n"


class Captured(UserError):
    """Raised where the testbed would come up: the CLI ends with exit 2 and the test reads what was handed on."""


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Stop `demo`, `run` and `calibrate` where they would start the testbed, keeping what they pass on."""
    import gesscale.testbed
    import gesscale.testbed.calibration
    import gesscale.testbed.demo

    got: dict[str, Any] = {}

    def keep(name: str) -> Any:
        def stop(arg: Any, *args: Any, **kwargs: Any) -> Any:
            got[name] = arg
            raise Captured("captured")
        return stop

    monkeypatch.setattr(gesscale.testbed.demo, "run_demo", keep("demo"))
    monkeypatch.setattr(gesscale.testbed.calibration, "calibrate_local", keep("calibrate"))
    monkeypatch.setattr(gesscale.testbed.Testbed, "up", staticmethod(keep("run")))
    return got


def _query_of(cmd: str, got: dict[str, Any]) -> str:
    if cmd == "demo":
        return got["demo"].query
    if cmd == "calibrate":
        return got["calibrate"].query
    return got["run"].job.query


def _argv(cmd: str, tmp_path: Path) -> list[str]:
    return {
        "demo": ["demo", "--no-view", "--out", str(tmp_path / "demo")],
        "run": ["run", "--no-view", "--run-dir", str(tmp_path / "run"), "--metrics-port", "0",
                "--state", str(tmp_path / "state.json")],
        "calibrate": ["calibrate", "--backend", "local", "--run-dir", str(tmp_path / "cal"),
                      "--out", str(tmp_path / "m.json"), "--replicas", "1"],
    }[cmd]


@pytest.mark.parametrize("cmd", ["demo", "run", "calibrate"])
def test_each_command_hands_the_query_to_the_testbed_job(cmd: str, captured: dict[str, Any], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(_argv(cmd, tmp_path)) == 2
    assert _query_of(cmd, captured) == "nearest-landmark"  # the default
    assert main([*_argv(cmd, tmp_path), "--query", "frequent-routes"]) == 2
    assert _query_of(cmd, captured) == "frequent-routes"
    (tmp_path / "mine.py").write_text(QUERY_FILE)
    monkeypatch.chdir(tmp_path)
    assert main([*_argv(cmd, tmp_path), "--query", "mine.py"]) == 2
    assert _query_of(cmd, captured) == f"{tmp_path / 'mine.py'}:build"  # absolute: the job runs elsewhere


@pytest.mark.parametrize("cmd", ["demo", "run", "calibrate"])
def test_a_bad_query_is_one_line_and_exit_2_before_the_testbed(cmd: str, captured: dict[str, Any], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_argv(cmd, tmp_path), "--query", "frequent-rootes"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gesscale: error: --query") and "frequent-routes" in err and "\n" not in err
    assert not captured


def test_an_attached_testbed_keeps_its_query_and_the_simulator_has_none(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--testbed", str(tmp_path), "--query", "frequent-routes", "--metrics-port", "0"]) == 2
    assert "attached testbed" in capsys.readouterr().err
    assert main(["calibrate", "--backend", "sim", "--query", "frequent-routes", "--out", str(tmp_path / "m")]) == 2
    assert "--backend local" in capsys.readouterr().err


def test_the_job_command_line_carries_the_query(tmp_path: Path) -> None:
    settings = testbed_job.JobSettings(bootstrap="b:1", query="frequent-routes")
    job = testbed_job.TestbedJob(tmp_path, "spark://127.0.0.1:7077", settings)
    argv = job.argv(2)
    assert argv[argv.index("--query") + 1] == "frequent-routes"
