"""The simulated twin of one demo run rebuilt from its report, with the run's events, latency source and bounds
(docs/events.md, "The twin sees the run's events"), the live policy run on it with --seeds seeds, and its
decisions against the run's (`gesscale.twin_decisions`) and its figures against the run's (`gesscale.fidelity`).

Reads the report (and, for a report written before its `network.events.entries` held the link changes, the
events file it names) and writes nothing.

    nice -n 19 .venv/bin/python benchmarks/twin_of_demo.py out/i32-measured/report.json --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gesscale.fidelity import fidelity_rows, observed, predicted, scale_changes
from gesscale.latency_map import event_entries, latency_map_from_dict, read_events
from gesscale.report import simulated_latency, summary
from gesscale.scenario import scenario_from_dict
from gesscale.simulate import run_once
from gesscale.twin import TWIN_NAME, build_twin, run_network
from gesscale.twin_decisions import compare_seeds, decision_cells


def twin_of_report(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the twin's scenario, what it was built from, where its events came from) of a demo report."""
    options = report.get("options") or {}
    controller = options.get("controller") or {}
    lmap_doc = report["calibrated_scenario"]["cluster"]["latency_map"]
    network = run_network(report)
    origin = "the report's network.events.entries"
    events = (report.get("network") or {}).get("events") or {}
    if events.get("file") and not any("event" not in e for e in network["events"]):
        path = Path(events["file"])
        if path.is_file():  # a report of before: its entries hold the fog events only
            lmap = latency_map_from_dict(lmap_doc, "report")
            network["events"] = event_entries(read_events(path), lmap, str(path))
            origin = f"{path} (the file the report names)"
    nodes = int(options.get("nodes") or len(lmap_doc.get("nodes") or {}))
    scenario, measured = build_twin(report["periods"], report["reconfigurations"], report.get("model"), lmap_doc,
                                    int(controller.get("max_replicas") or nodes), options.get("warmup_s"),
                                    float(options.get("control_period_s") or 10.0), report.get("arrivals"),
                                    min_replicas=int(controller.get("min_replicas") or 1), **network)
    return scenario, measured, origin


def main() -> None:
    """Print the twin's events, its fidelity rows and its decisions against the run's, per seed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a demo report.json")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the twin (default 3)")
    args = ap.parse_args()
    if not args.report.is_file():
        sys.exit(f"twin_of_demo: no report at {args.report}")
    report = json.loads(args.report.read_text())
    policy = report["options"]["policy"]
    scenario, measured, origin = twin_of_report(report)
    print(f"{args.report}: {policy}, latency source {measured['latency_source']}, twin t = 0 at "
          f"{measured['zero_s']:g} s of the controller's clock; events from {origin}:")
    for e in scenario.get("events", []):
        print(f"  twin t = {e['t_s']:g} s (run's clock {e['t_s'] + measured['zero_s']:.1f} s): {e}")
    sc = scenario_from_dict(scenario, TWIN_NAME)
    runs = [run_once(sc, policy, seed, keep_history=True) for seed in range(1, args.seeds + 1)]
    twin = predicted(summary({policy: runs})[policy], simulated_latency({policy: runs})["by_policy"].get(policy), runs)
    live = observed(report["periods"], scale_changes(report["reconfigurations"]), report.get("latency"))
    for row in fidelity_rows(live, twin):
        print(f"  {row['figure']:18s} live {row['live']}  twin {row['twin']}  within {row['within']}")
    result = compare_seeds(report["reconfigurations"], {r.seed: r.history for r in runs}, measured["zero_s"],
                           float(report["options"].get("control_period_s") or 10.0), policy)
    print(f"decisions: the same in {result['same_in']} of {result['of']} seeds (±2 periods)")
    for seed, res in result["seeds"].items():
        header, cells = decision_cells(res)
        print(f" seed {seed}: {res['matched']} of {res['live']} live decisions the same, twin {res['twin']}")
        print("   " + " | ".join(header))
        for c in cells:
            print("   " + " | ".join(c))
        for line in res["differences"]:
            print(f"   - {line}")


if __name__ == "__main__":
    main()
