"""The simulated twin of every complete run of a live bundle against the run, and each run predicted from the
calibration of the run before it (issue 30; docs/experiments.md, "The simulated twin of a live run").

Reads only `runs/<run>.json` and `live/<run>/report.json` of the bundle (a bundle still being written works: the
runs done so far, those of an incomplete last block left out with --blocks) and writes nothing. Each twin is
rebuilt from its run's report by `twin_of_run`, as `gesscale experiment replay` does; the live policy runs on it
with --seeds seeds; the medians are set against the run (`gesscale.fidelity`). The cross-run prediction runs run
k's twin with the operator of the same policy's run in block k-1.

    nice -n 19 .venv/bin/python benchmarks/twin_live_bundle.py runs/live-table3 --blocks 4 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gesscale.experiment.replay import twin_of_run
from gesscale.fidelity import fidelity_rows, predicted
from gesscale.report import simulated_latency, summary
from gesscale.scenario import scenario_from_dict
from gesscale.simulate import simulate_many


def _twins(bundle: Path, blocks: int | None) -> dict[str, tuple[str, int, dict[str, Any], dict[str, Any]]]:
    """run id -> (policy, block, twin scenario, live figures)."""
    out = {}
    for path in sorted((bundle / "runs").glob("*.json")):
        run = json.loads(path.read_text())
        if blocks is not None and int(run["block"]) > blocks:
            continue
        report_path = bundle / "live" / path.stem / "report.json"
        report = json.loads(report_path.read_text()) if report_path.is_file() else None
        scenario, _, seen = twin_of_run(run["calibrated_scenario"], report, run["live"])
        out[path.stem] = (run["policy"], int(run["block"]), scenario, seen)
    return out


def _line(rid: str, policy: str, scenario: dict[str, Any], seen: dict[str, Any], seeds: int) -> tuple[str, bool]:
    results = simulate_many(scenario_from_dict(scenario, rid), [policy], seeds)
    twin = predicted(summary(results)[policy], simulated_latency(results)["by_policy"].get(policy), results[policy])
    rows = {r["key"]: r for r in fidelity_rows(seen, twin)}
    rc, rm = rows["reconfigurations"], rows["replica_minutes"]
    ok = bool(rc["within"] and rm["within"])
    pct = "–" if rm["error_pct"] is None else f"{rm['error_pct']:+.0f} %"
    live_rm = "unknown" if rm["live"] is None else f"{rm['live']:.2f}"  # a run stopped inside a change
    verdict = "within" if ok else "unknown" if rm["live"] is None else "outside"
    return (f"{rid:22s} reconfigurations {rc['live']} / {rc['twin']:.0f}   replica-minutes "
            f"{live_rm} / {rm['twin']:.2f} ({pct})   {verdict}"), ok


def main() -> None:
    """Print one line per run (own twin), then one per run predicted from the run before it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path, help="a live bundle (experiment run with environment: local)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per twin (default 3, as experiment replay)")
    ap.add_argument("--blocks", type=int, default=None, help="only the runs of blocks 1..N (the complete ones)")
    args = ap.parse_args()
    if not (args.bundle / "runs").is_dir():
        sys.exit(f"twin_live_bundle: {args.bundle} has no runs/ folder")
    twins = _twins(args.bundle, args.blocks)
    for title, pairs in (("own twin", [(rid, rid) for rid in twins]),
                         ("from the run before", [(rid, f"{rid.rsplit('-b', 1)[0]}-b{twins[rid][1] - 1}")
                                                  for rid in twins])):
        print(f"{title} (live / twin, {args.seeds} seeds):")
        within: dict[str, list[bool]] = {}
        for rid, source in pairs:
            if source not in twins:
                continue
            policy, _, scenario, seen = twins[rid]
            line, ok = _line(rid, policy, {**scenario, "operator": twins[source][2]["operator"]}, seen, args.seeds)
            within.setdefault(policy, []).append(ok)
            print(f"  {line}" + ("" if source == rid else f"   (from {source})"))
        print("  within both goals: " + ", ".join(f"{p} {sum(v)} of {len(v)}" for p, v in within.items()))


if __name__ == "__main__":
    main()
