"""The CLI: bad input gives one clear line and exit code 2; simulate prints and writes its outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = "nodes: [a, b, c]\nrtt_ms:\n  a: {b: 10, c: 20}\n  b: {c: 15}\n"


def gesscale(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gesscale", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def scenario_text(cluster: str = "  latency_map: map.yaml\n", workload: str | None = "  kind: steps\n"
                  "  levels: [50, 150]\n  step_s: 600\n") -> str:
    text = "name: t\ncontrol_period_s: 60\ncluster:\n" + cluster + "operator:\n  alpha: 60\n"
    if workload is not None:
        text += "workload:\n" + workload
    return text


@pytest.mark.parametrize(("files", "args", "message"), [
    ({}, ["--policies", "gesscale,nosuch"], "unknown policy 'nosuch'"),
    ({"map.yaml": "nodes: [a, b, c]\nrtt_ms:\n  a: {b: 10, c: 20}\n"}, [], "missing RTT for pair (b, c)"),
    ({"map.yaml": MAP.replace("c: 20", "c: -20")}, [], "pair (a, c): RTT must not be negative"),
    ({"s.yaml": "name: [unclosed\n"}, [], "malformed YAML"),
    ({"s.yaml": scenario_text(workload=None)}, [], "missing 'workload'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, files: dict[str, str], args: list[str],
                                          message: str) -> None:
    (tmp_path / "map.yaml").write_text(MAP)
    (tmp_path / "s.yaml").write_text(scenario_text())
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r = gesscale("simulate", "--scenario", str(tmp_path / "s.yaml"), *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_policies_help_lists_every_policy_with_one_line() -> None:
    r = gesscale("simulate", "--scenario", "scenarios/pi10-taxi.yaml", "--policies", "help")
    assert r.returncode == 0
    for pid in ("gesscale", "thr-nlunaware", "thr-nlaware", "mdl-nlunaware", "ideal", "static"):
        assert any(line.split() and line.split()[0] == pid for line in r.stdout.splitlines()), pid


def test_simulate_paper_comparison(tmp_path: Path) -> None:
    """The issue's acceptance command: Gesscale against the paper's baselines on the taxi scenario."""
    out = tmp_path / "out.json"
    r = gesscale("simulate", "--scenario", "scenarios/pi10-taxi.yaml", "--policies",
                 "gesscale,thr-nlunaware,thr-nlaware,mdl-nlunaware,ideal", "--seeds", "5", "--json", str(out),
                 "--plot", str(tmp_path / "plots"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["scenario"] == "pi10-taxi" and doc["duration_s"] == 17280
    keys = {"accuracy_o", "accuracy_u", "timeshare_o", "timeshare_u", "excess_time", "reconfigurations", "moves",
            "cost", "instability", "jitter", "avg_replicas", "max_backlog", "p95_delay_s"}
    assert all(set(m) == keys for m in doc["policies"].values())
    p = doc["policies"]
    g = p["gesscale"]
    assert g["reconfigurations"] <= 0.6 * p["thr-nlunaware"]["reconfigurations"]
    for base in ("thr-nlunaware", "thr-nlaware", "mdl-nlunaware"):
        assert g["cost"] < p[base]["cost"]
    for base in ("thr-nlunaware", "thr-nlaware"):  # accuracy counts the backlog: gesscale holds more than mdl's
        assert g["accuracy_u"] + g["accuracy_o"] < p[base]["accuracy_u"] + p[base]["accuracy_o"]
    assert [p.name for p in (tmp_path / "plots").glob("*.png")] == ["pi10-taxi-figure7.png"]  # every policy
    assert "gesscale" in r.stdout and "reconf" in r.stdout
