"""benchmarks/spark_tasks.py: Spark's tasks per fog node against the node's RTT to the site (docs/calibration.md,
"Where a batch's time goes"). The sampler itself runs against a real driver UI in tests/jobs/test_queries.py."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.latency_map import load_latency_map
from gesscale.testbed.fleet import node_host

ROOT = Path(__file__).resolve().parents[1]
RHINE6 = ROOT / "inventory/latency/rhine6.yaml"
RECORDED = ROOT / "tests/data/spark_tasks_rhine6_n5.jsonl"  # sampled during bench_placement's n = 5 (2026-11-28)
sys.path.insert(0, str(ROOT / "benchmarks"))
import spark_tasks  # noqa: E402


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_an_exact_linear_cost_is_recovered_and_each_node_summarised() -> None:
    lmap = load_latency_map(RHINE6)
    hosts = {n: node_host(n, i) for i, n in enumerate(lmap.names)}
    tasks = [{"host": hosts[n], "ms": 200 + 30 * lmap.rtt(n, "fog2") + 0.8 * rec, "run_ms": 0, "records": rec}
             for n in lmap.names for rec in (50, 300, 600)]
    tasks.append({"host": "10.9.9.9", "ms": 99999, "run_ms": 0, "records": 1})  # not a node of the map: left out
    cold = {"host": hosts["fog1"], "ms": 22000, "run_ms": 0, "records": 200}  # a new executor's first task
    got = spark_tasks.summary([{"tasks": tasks}, {"tasks": [cold]}], lmap, "fog2")
    assert got["left_out"] == 1 and got["left_out_above_ms"] == pytest.approx(5 * statistics.median(
        t["ms"] for t in tasks[:-1] + [cold]))
    kept = spark_tasks.summary([{"tasks": tasks}, {"tasks": [cold]}], lmap, "fog2", outlier_factor=0)
    assert kept["left_out"] == 0 and kept["fit"]["r2"] < 0.9  # the cold start spoils the fit
    fit = got["fit"]
    assert fit["ms"] == pytest.approx(200) and fit["ms_per_rtt_ms"] == pytest.approx(30)
    assert fit["ms_per_record"] == pytest.approx(0.8) and fit["r2"] == pytest.approx(1.0)
    assert fit["tasks"] == 3 * len(lmap.names)
    assert got["nodes"]["fog2"]["rtt_to_site_ms"] == 0 and got["nodes"]["fog4"]["median_records"] == 300


def test_the_recorded_tasks_wait_for_the_site_far_nodes_take_three_times_as_long() -> None:
    got = spark_tasks.summary(lines_of(RECORDED), load_latency_map(RHINE6), "fog2")
    near = [v["median_ms"] for n, v in got["nodes"].items() if v["rtt_to_site_ms"] < 2 and n != "fog3"]
    far = [v["median_ms"] for v in got["nodes"].values() if v["rtt_to_site_ms"] > 30]
    assert max(near) * 2.5 < min(far)
    assert 15 < got["fit"]["ms_per_rtt_ms"] < 45 and got["fit"]["tasks"] == 50


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/spark_tasks.py"), *args], capture_output=True,
                          text=True, timeout=120)


def test_summarise_prints_a_line_per_node_and_the_fit() -> None:
    out = run("summarise", str(RECORDED), "--map", str(RHINE6), "--site", "fog2")
    assert out.returncode == 0, out.stderr
    assert "task ms = " in out.stdout and "x RTT to fog2" in out.stdout
    assert sum(1 for x in out.stdout.splitlines() if x.startswith("fog")) == 6


@pytest.mark.parametrize("case", ["site", "garbage", "missing", "factor"])
def test_summarise_refuses_bad_input_in_one_line(tmp_path: Path, case: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("[1, 2]\n" if case == "garbage" else RECORDED.read_text())
    path = str(tmp_path / "none.jsonl") if case == "missing" else str(f)
    extra = ["--outlier-factor", "nan"] if case == "factor" else []
    out = run("summarise", path, "--map", str(RHINE6), "--site", "nowhere" if case == "site" else "fog2", *extra)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "summarise:" in out.stderr


@pytest.mark.parametrize("args", [["--ui", "127.0.0.1:15640"], ["--every", "0"], ["--polls", "0"]])
def test_sample_refuses_what_cannot_be_polled_in_one_line(tmp_path: Path, args: list[str]) -> None:
    out = run("sample", "--out", str(tmp_path / "t.jsonl"), "--polls", "1", *args)
    assert out.returncode == 2 and "Traceback" not in out.stderr and not (tmp_path / "t.jsonl").exists()
