"""The fault table: run the fault-injection suite (`tests/faults/`) N times and print, per fault, the runs, the
records sent, lost and duplicated (the tests' own counts by key in the sink) and what the tool itself reported.

Each repetition is one pytest run of the suite with `GESSCALE_FAULT_SEED` set (seed, seed+1, ...), so every kill
moment is replayable; the tests append one JSON line per fault to `GESSCALE_FAULT_LOG` (tests/faults/support.py).
A run whose test failed still counts: its figures are in the table and the failure is listed. Heavy (Spark, the
testbed): run it under the shared lock.

    flock /tmp/gesscale-heavy.lock .venv/bin/python benchmarks/bench_faults.py [--repeat 3] [--seed 1] [-k mqtt]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per fault (in first-seen order): runs, sums of sent/lost/duplicated, the reports (pure)."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by[row["fault"]].append(row)
    return [{"fault": name, "runs": len(rs), "sent": sum(r["sent"] for r in rs), "lost": sum(r["lost"] for r in rs),
             "duplicated": sum(r["duplicated"] for r in rs), "seeds": [r["seed"] for r in rs],
             "reported": [r["reported"] for r in rs]} for name, rs in by.items()]


def table(lines: list[dict[str, Any]]) -> str:
    """Markdown table of `summarize`'s lines; the tool's report of the last run of each fault."""
    out = ["| fault | runs | records sent | lost | duplicated | reported by the tool (last run) |",
           "|---|---|---|---|---|---|"]
    for s in lines:
        out.append(f"| {s['fault']} | {s['runs']} | {s['sent']:,} | {s['lost']} | {s['duplicated']} | "
                   f"{s['reported'][-1][:160]} |")
    return "\n".join(out)


def main() -> int:
    """Run the suite `--repeat` times and print the table; exit 1 when a run lost records or a test failed (a
    test fails on any duplicate the tool did not report itself)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of the whole suite (default 1)")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000, help="seed of the first run")
    ap.add_argument("-k", default="", help="pytest -k expression: only these faults")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gesscale-faults-") as tmp:
        log = Path(tmp) / "faults.jsonl"
        for i in range(args.repeat):
            seed = args.seed + i
            env = {**os.environ, "GESSCALE_FAULT_LOG": str(log), "GESSCALE_FAULT_SEED": str(seed)}
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/faults",
                   *(["-k", args.k] if args.k else [])]
            t0 = time.monotonic()
            res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            last = (res.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"run {i + 1}/{args.repeat}, seed {seed}: {last} ({time.monotonic() - t0:.0f} s)", flush=True)
            if res.returncode != 0:
                failures += [f"seed {seed}: {x}" for x in res.stdout.splitlines() if x.startswith("FAILED")]
        if log.exists():
            rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    lines = summarize(rows)
    print(f"\n{len(rows)} fault injections in {time.monotonic() - started:.0f} s\n")
    print(table(lines))
    for f in failures:
        print(f"failed: {f}")
    bad = failures or any(s["lost"] for s in lines)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
