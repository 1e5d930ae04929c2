"""Predict each live run from the calibration of the run before it (issue 30's cross-run check).

For consecutive report folders A, B (each holding a demo's `report.json`): run B's twin scenario (its input, as
the topic received it) with run A's operator (MST model, noise, measured reconfiguration timing), simulated for
gesscale with one seed, against B's live reconfigurations and replica-minutes, beside B's own twin.

    .venv/bin/python benchmarks/twin_cross_runs.py out/demo out/demo-2 out/demo-3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


def _report(folder: Path) -> dict:
    path = folder / "report.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        sys.exit(f"twin_cross_runs: cannot read {path}: {err}")
    if "calibrated_scenario" not in doc or "fidelity" not in doc:
        sys.exit(f"twin_cross_runs: {path} has no twin (a demo report from this version is needed)")
    return doc


def cross_prediction(before: dict, run: dict, work: Path) -> dict[str, float]:
    """gesscale's reconfigurations and replica-minutes on `run`'s twin scenario with `before`'s operator."""
    scenario = dict(run["calibrated_scenario"])
    scenario["operator"] = before["calibrated_scenario"]["operator"]
    (work / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    subprocess.run([sys.executable, "-m", "gesscale", "simulate", "-s", str(work / "scenario.yaml"), "-p",
                    "gesscale", "-n", "1", "--json", str(work / "out.json")], check=True, capture_output=True)
    medians = json.loads((work / "out.json").read_text())["policies"]["gesscale"]
    return {"reconfigurations": medians["reconfigurations"], "replica_minutes": medians["cost"]}


def main() -> None:
    """Print one line per consecutive pair of report folders."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path, help="demo output folders, in the order they ran")
    args = ap.parse_args()
    if len(args.folders) < 2:
        ap.error("give at least two report folders")
    reports = [_report(f) for f in args.folders]
    with tempfile.TemporaryDirectory() as tmp:
        named = list(zip(args.folders, reports, strict=True))
        for (name_a, a), (name_b, b) in zip(named, named[1:], strict=False):
            got = cross_prediction(a, b, Path(tmp))
            live = {r["key"]: r["live"] for r in b["fidelity"]}
            own = {r["key"]: r["twin"] for r in b["fidelity"]}
            err = 100.0 * (got["replica_minutes"] - live["replica_minutes"]) / live["replica_minutes"]
            print(f"{name_b} from {name_a}'s calibration: reconfigurations {got['reconfigurations']:.0f} (live "
                  f"{live['reconfigurations']}, own twin {own['reconfigurations']:.0f}); replica-minutes "
                  f"{got['replica_minutes']:.2f} (live {live['replica_minutes']:.2f}, {err:+.0f} %; own twin "
                  f"{own['replica_minutes']:.2f})")


if __name__ == "__main__":
    main()
