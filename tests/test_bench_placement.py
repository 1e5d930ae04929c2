"""benchmarks/bench_placement.py --analyse: every form fitted with ND_max and with the farthest RTT to the site in
its place, on the measurements of earlier runs (docs/calibration.md, "Measured live")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.latency_map import load_latency_map

ROOT = Path(__file__).resolve().parents[1]
RHINE6 = ROOT / "inventory/latency/rhine6.yaml"
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_placement  # noqa: E402


def test_the_site_rtt_of_a_placement_is_its_farthest_node_from_the_site_and_0_on_the_site() -> None:
    lmap = load_latency_map(RHINE6)
    assert bench_placement.site_rtt(lmap, ("fog2",), "fog2") == 0.0
    assert bench_placement.site_rtt(lmap, ("fog2", "fog4"), "fog2") == lmap.rtt("fog4", "fog2")
    far = ("fog4", "fog5", "fog6")
    assert bench_placement.site_rtt(lmap, far, "fog2") == max(lmap.rtt(v, "fog2") for v in far)


def doc(lmap: object, site: str = "fog2") -> dict:
    """A placement.json whose MSTs follow the per-replica form in the site RTT exactly."""
    configs = [("fog3",), ("fog3", "fog1"), ("fog1", "fog5"), ("fog4", "fog6"), ("fog3", "fog1", "fog2"),
               ("fog1", "fog5", "fog6"), ("fog2", "fog3", "fog1", "fog6")]
    rows = []
    for k, nodes in enumerate(configs):
        d = bench_placement.site_rtt(lmap, nodes, site)
        mst = 400 * len(nodes) ** 0.8 - 2.0 * len(nodes) * d
        rows.append({"n": len(nodes), "kind": "far" if k == 3 else "near", "nodes": list(nodes),
                     "nd_max_ms": lmap.nd_max(nodes), "mst": [mst, mst], "bounded": [True, True]})
    return {"site": site, "rows": rows}


def analyse(tmp_path: Path, data: dict, *extra: str) -> subprocess.CompletedProcess:
    f = tmp_path / "placement.json"
    f.write_text(json.dumps(data))
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_placement.py"), "--analyse", str(f),
                           "--map", str(RHINE6), *extra], capture_output=True, text=True, timeout=120)


def test_analyse_fits_every_form_on_nd_max_and_on_the_site_rtt(tmp_path: Path) -> None:
    out = analyse(tmp_path, doc(load_latency_map(RHINE6)))
    assert out.returncode == 0, out.stderr
    nd, site = out.stdout.split("model forms with the farthest RTT to the site")
    assert "model forms with ND_max" in nd
    per_replica = next(line for line in site.splitlines() if line.strip().startswith("per-replica"))
    assert "median |error| 0.0%" in per_replica  # the points are that form in that variable, exactly
    assert "far n = 2 fog4+fog6 (site_rtt_ms" in site


@pytest.mark.parametrize("break_it", ["node", "nd", "site"])
def test_analyse_refuses_a_map_that_is_not_the_runs(tmp_path: Path, break_it: str) -> None:
    data = doc(load_latency_map(RHINE6))
    if break_it == "node":
        data["rows"][0]["nodes"] = ["nowhere"]
    elif break_it == "nd":
        data["rows"][1]["nd_max_ms"] += 5
    else:
        del data["site"]
    out = analyse(tmp_path, data)
    assert out.returncode == 2 and "--analyse:" in out.stderr and "Traceback" not in out.stderr


def test_predict_fits_on_the_analysed_files_and_predicts_the_others_out_of_sample(tmp_path: Path) -> None:
    lmap = load_latency_map(RHINE6)
    test = doc(lmap)
    test["rows"] = []
    for kind, nodes in (("near", ("fog3", "fog1", "fog2", "fog6", "fog5")), ("far", ("fog1", "fog2", "fog4", "fog5",
                                                                                       "fog6"))):
        d = bench_placement.site_rtt(lmap, nodes, "fog2")
        mst = 400 * len(nodes) ** 0.8 - 2.0 * len(nodes) * d  # the same form as the fitted files, at n = 5
        test["rows"].append({"n": 5, "kind": kind, "nodes": list(nodes), "nd_max_ms": lmap.nd_max(nodes),
                             "mst": [mst], "bounded": [True]})
    other = tmp_path / "other.json"
    other.write_text(json.dumps(test))
    out = analyse(tmp_path, doc(lmap), "--predict", str(other))
    assert out.returncode == 0, out.stderr
    site = out.stdout.split("model forms with the farthest RTT to the site")[1]
    lines = [x for x in site.split("out of sample")[1].splitlines() if x.strip().startswith("n = 5")]
    assert len(lines) == 2 and all("per-replica +0.0%" in x or "per-replica -0.0%" in x for x in lines), lines
    assert "mean |error|:" in site


@pytest.mark.parametrize("case", ["alone", "other site"])
def test_predict_refuses_what_it_cannot_check(tmp_path: Path, case: str) -> None:
    lmap = load_latency_map(RHINE6)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc(lmap, site="fog3")))
    f = tmp_path / "placement.json"
    f.write_text(json.dumps(doc(lmap)))
    args = ["--predict", str(other)] if case == "alone" else ["--analyse", str(f), "--predict", str(other)]
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_placement.py"), *args, "--map", str(RHINE6)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert ("needs --analyse" if case == "alone" else "another site") in out.stderr


def test_the_recorded_rhine6_runs_give_the_documented_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/calibration.md ("Eight repeats") reads these figures off `--analyse` of the files in
    benchmarks/results/rhine6: the site latency's per-batch form at 8.0 % median, ND_max's at 11.5 %, far n = 3
    held out."""
    runs = ROOT / "benchmarks/results/rhine6"
    bench_placement.analyse_runs(RHINE6, [runs / f"{r}.json" for r in ("i30b", "i30c", "i41b", "i42")],
                                 [runs / "i41-n5-n6.json"])
    nd, site = capsys.readouterr().out.split("model forms with the farthest RTT to the site")

    def line(text: str, start: str) -> str:
        return next(x for x in text.splitlines() if x.strip().startswith(start))

    assert "80 measurements, none censored" in nd and "80 measurements" in site
    assert "median |error| 11.5%" in line(nd, "per-batch")
    assert "median |error| 8.0%" in line(site, "per-batch")
    assert "auto (per-batch) -8.0%" in line(site, "far n = 3")
    assert "auto (per-batch) -16.4%" in line(nd, "far n = 3")
