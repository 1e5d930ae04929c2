"""Inputs that were tracebacks, hangs or silently accepted nonsense (issues 28 and 33), each now one line and exit
2, or a stated warning: values on the command line (NaN, huge integers, control characters, CPU quantities),
options of another backend, output paths checked before the work, durations with units, RTTs in seconds, a
scenario file given to `compare`, an environment not built, plug-ins that exit, damaged rate CSVs and bundles."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from gesscale.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
MAP = {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 20}, "b": {"c": 15}}}


def _scenario(tmp_path: Path, **changes: Any) -> Path:
    data: dict[str, Any] = {
        "name": "t", "control_period_s": 60, "cluster": dict(MAP, max_replicas=3),
        "operator": {"alpha": 60, "initial_replicas": 1},
        "workload": {"kind": "steps", "levels": [50, 100], "step_s": 600},
    }
    data.update(changes)
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI; assert exit 2 with one error line and no traceback; return the line."""
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gesscale: error: "), err
    return lines[0]


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The long parts of the commands fail the test: a bad input must be refused before them."""
    import gesscale.compare
    import gesscale.probe
    import gesscale.simulate

    def refuse(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the work started before the input was refused")

    monkeypatch.setattr(gesscale.simulate, "simulate_many", refuse)
    monkeypatch.setattr(gesscale.compare, "run_matrix", refuse)
    monkeypatch.setattr(gesscale.probe, "calibrate", refuse)


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize(("argv", "message"), [
    (["produce", "--rate", "nan", "--duration", "10"], "'--rate': must be a finite number, got nan"),
    (["produce", "--give-up-after", "nan"], "'--give-up-after': must be a finite number, got nan"),
    (["produce", "--speed", "inf"], "'--speed': must be a finite number, got inf"),
    (["k8s", "render", "--image", "job:1\nrm -rf /"], "'--image': must not contain control characters"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--seed", "1" + "0" * 30], "must have at most 18 digits"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--bp-high", "nan"], "must be a finite number"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--control-period", "2d"], "must be in (0, 86400]"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "-p", "optimal", "--policy-option", "bins=1e9"],
     "'bins' must be in [2, 100000]"),
    (["calibrate", "--backend", "sim", "--node-cpu", "0.5"],
     "--node-cpu applies to --backend local only; --backend sim would ignore it"),
    (["calibrate", "--backend", "sim", "--model-latency", "far"], "--model-latency must be one of nd_max, site"),
    (["calibrate", "--backend", "sim", "--model-latency", "site"],
     "has no cluster.site"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--model-latency", "site"],
     "model_latency site needs cluster.site"),
])
def test_a_bad_command_line_value_is_one_line(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line(argv, capsys)
    assert message in line, line
    assert len(line) < 300


def test_a_cpu_quantity_that_is_not_one_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line(["k8s", "render", "--executor-cpu", "banana", "--out", str(tmp_path / "b")], capsys)
    assert "executor CPU 'banana': expected a CPU quantity above 0" in line
    assert not (tmp_path / "b").exists()


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("flag", ["--json", "--plot", "--timeseries"])
def test_an_unwritable_output_is_refused_before_the_simulation(flag: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An unwritable --json was reported only after the whole simulation (issue 33)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = _one_line(["simulate", "-s", str(_scenario(tmp_path)), flag, str(blocker / "out")], capsys)
    assert f"{flag} {blocker / 'out'}: {blocker} is not a folder" in line


@pytest.mark.usefixtures("no_work")
def test_compare_refuses_an_unwritable_out_before_running(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "taken"
    target.write_text("")
    line = _one_line(["compare", "-s", str(_scenario(tmp_path)), "-o", str(target)], capsys)
    assert f"--out {target} is a file, not a folder" in line


def test_compare_takes_one_scenario_file(tmp_path: Path) -> None:
    """`compare --scenarios FILE.yaml` said 'scenario folder not found' for an existing file."""
    from gesscale.compare import find_scenarios

    path = _scenario(tmp_path)
    assert find_scenarios(path) == [path]
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(UserError, match=r"a scenario file ends in \.yaml or \.yml"):
        find_scenarios(tmp_path / "notes.txt")
    with pytest.raises(UserError, match="scenario folder or file not found"):
        find_scenarios(tmp_path / "missing.yaml")


def test_durations_with_units_are_taken_everywhere_in_a_scenario(tmp_path: Path) -> None:
    """`duration_s: 4h` was refused though controller durations took `1h`: one parser for all."""
    sc = scenario_from_dict({
        "name": "t", "control_period_s": "2m", "warmup_s": "5m", "cluster": MAP,
        "operator": {"reconfig_pause_s": "90s"},
        "workload": {"kind": "cosine", "mean": 100, "amplitude": 50, "period_s": "1h", "duration_s": "4h"},
    })
    assert sc.workload["duration_s"] == 4 * 3600 and sc.workload["period_s"] == 3600
    assert (sc.control_period_s, sc.warmup_s, sc.truth.reconfig_pause_s) == (120, 300, 90)
    with pytest.raises(UserError, match="'duration_s' must be a duration"):
        scenario_from_dict({"cluster": MAP, "workload": {"kind": "cosine", "mean": 1, "duration_s": [1]}})
    with pytest.raises(UserError, match="'duration_s': '4 hours' is not a duration like"):
        scenario_from_dict({"cluster": MAP, "workload": {"kind": "cosine", "mean": 1, "duration_s": "4 hours"}})


def test_rtts_written_in_seconds_are_a_warning() -> None:
    """0.010 (10 ms written in seconds) was taken without a word."""
    sc = scenario_from_dict({"cluster": {"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 0.010}}},
                             "workload": {"kind": "steps", "levels": [10], "step_s": 60}})
    assert any("below 0.05 ms" in w and "not 0.010 s" in w for w in sc.warnings), sc.warnings


def test_an_environment_not_built_names_those_that_are() -> None:
    """`environment: k8s` said "only 'sim' runs" although `local` runs too."""
    from gesscale.experiment.spec import spec_from_dict

    with pytest.raises(UserError) as err:
        spec_from_dict({"environment": "k8s"})
    assert "'sim', 'local'" in str(err.value)


@pytest.mark.parametrize(("where", "code"), [("import", "raise SystemExit(0)\n"), ("decide", "")])
def test_a_plugin_that_exits_is_an_error_not_a_success(where: str, code: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A plug-in calling exit(0) ended the command with exit code 0 and no output."""
    plugin = tmp_path / f"exiting_{where}.py"
    plugin.write_text(code + (
        "from gesscale.policies.base import Policy\n"
        f"class Exiting(Policy):\n    id = 'exiting-{where}'\n"
        "    def decide(self, obs, ctx):\n        raise SystemExit(0)\n"))
    line = _one_line(["simulate", "-s", str(_scenario(tmp_path)), "-p", f"{plugin}:Exiting"], capsys)
    assert "exit(0)" in line and "must" in line


@pytest.mark.parametrize(("content", "message"), [
    ("t_s,rate\n0,nan\n", "t_s and rate must be finite numbers"),
    ("t_s,rate\n0,1\n1e12,5\n", "is beyond 2.592e+06 s"),
    (b"\x00\x01\x02binary", "not a text file"),
    (gzip.compress(b"t_s,rate\n0,1\n"), "a gzip file"),
])
def test_a_damaged_rate_csv_is_one_line(content: str | bytes, message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "rates.csv"
    if isinstance(content, bytes):
        csv.write_bytes(content)
    else:
        csv.write_text(content)
    path = _scenario(tmp_path, workload={"kind": "csv", "path": str(csv)})
    line = _one_line(["simulate", "-s", str(path), "-p", "static"], capsys)
    assert message in line, line


def test_a_device_as_the_taxi_trace_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`gesscale produce /dev/zero` read the device forever."""
    import threading

    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(main(["produce", "/dev/zero", "--limit", "1"])),
                              daemon=True)
    runner.start()
    runner.join(20)
    assert result == [2], "produce did not return"
    assert "taxi file /dev/zero is a device, not a regular file" in capsys.readouterr().err


def test_a_fifo_as_a_rate_csv_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    fifo = tmp_path / "rates.csv"
    os.mkfifo(fifo)
    path = _scenario(tmp_path, workload={"kind": "csv", "path": str(fifo), "duration_s": 60})
    line = _one_line(["simulate", "-s", str(path), "-p", "static"], capsys)
    assert "is a FIFO (named pipe), not a regular file" in line


@pytest.mark.parametrize("content", ["[1, 2]", "{\"environment\": \"sim\"}", "{\"environment\": \"sim\", "
                                     "\"scenario_path\": \"s.yaml\", \"policies\": 3, \"name\": 1}", "\x00garbage"])
def test_a_damaged_bundle_is_one_line(content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "spec.resolved.json").write_text(content)
    _scenario(bundle)
    (bundle / "metrics.json").write_text("{}")
    line = _one_line(["experiment", "replay", str(bundle)], capsys)
    assert str(bundle) in line
