"""Where a micro-batch's time goes, per fog node: the job's Spark tasks sampled from the driver's UI, and what their
durations owe to the node's RTT to the site (broker and driver) and to their records.

A micro-batch lasts as long as its slowest task. `sample` polls the driver's REST API (`/api/v1`, the job's
`spark.ui.port`: 15040 + the testbed's port shift, e.g. 15640 under `bench_placement.py`) every `--every` seconds
and appends the newest completed stages' tasks to a JSON-lines file (host, duration, run time, records read); it
reads a few stages per poll, so that it costs the driver little while a measurement runs. `summarise` maps each
task's host to its node (fogK on 127.0.0.(30+K), gesscale.testbed.fleet), gives per node its RTT to the site,
the median task time and records, and fits ms = a + b * RTT_to_site + c * records by least squares over the
tasks (b: milliseconds per ms of RTT, i.e. the round trips a task makes to broker and driver). A task longer
than `--outlier-factor` times the median of all (default 5) is left out of the fit and counted: the first task
of a newly added executor includes its cold start (JVM, Python worker; 20-24 s here), which is no cost of a
batch in the steady state.

    .venv/bin/python benchmarks/spark_tasks.py sample --ui http://127.0.0.1:15640 --out tasks.jsonl [--every 45]
    .venv/bin/python benchmarks/spark_tasks.py summarise tasks.jsonl --map inventory/latency/rhine6.yaml --site fog2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gesscale.errors import UserError  # noqa: E402
from gesscale.latency_map import LatencyMap, load_latency_map  # noqa: E402
from gesscale.testbed.fleet import node_host  # noqa: E402


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def task_rows(tasks: list[dict]) -> list[dict]:
    """The fields kept of Spark's task entries: host, duration and executor run time (ms), records read."""
    return [{"host": t["host"], "ms": t["duration"], "run_ms": t["taskMetrics"]["executorRunTime"],
             "records": t["taskMetrics"]["inputMetrics"]["recordsRead"]}
            for t in tasks if t.get("status") == "SUCCESS" and t.get("taskMetrics")]


def sample(ui: str, out: Path, every_s: float, stages: int, polls: int | None) -> None:
    """Append the newest `stages` completed stages' tasks to `out` every `every_s` s (each stage once), `polls`
    times (None: until interrupted). A driver not (yet, or no longer) answering is waited for."""
    base = ui.rstrip("/") + "/api/v1/applications"
    seen: set[tuple[str, int, int]] = set()
    done = 0
    with out.open("a") as f:
        while polls is None or done < polls:
            try:
                app = _get(base)[0]["id"]
                newest = sorted(_get(f"{base}/{app}/stages?status=complete"), key=lambda s: s["stageId"])[-stages:]
                for s in newest:
                    key = (app, s["stageId"], s["attemptId"])
                    if key in seen:
                        continue
                    seen.add(key)
                    tasks = _get(f"{base}/{app}/stages/{s['stageId']}/{s['attemptId']}/taskList?length=1000")
                    f.write(json.dumps({"t": round(time.time(), 3), "app": app, "stage": s["stageId"],
                                        "tasks": task_rows(tasks)}) + "\n")
                f.flush()
            except (urllib.error.URLError, OSError, ValueError, IndexError, KeyError) as err:
                print(f"driver UI not answering ({err}); waiting", file=sys.stderr)
            done += 1
            if polls is None or done < polls:
                time.sleep(every_s)


def check_lines(lines: object) -> None:
    """ValueError unless `lines` are what `sample` writes: mappings whose `tasks` are mappings with a `host` (a
    string), `ms` and `records` (numbers >= 0)."""
    if not isinstance(lines, list):
        raise ValueError("not a list of sampled stages")
    for i, line in enumerate(lines, 1):
        tasks = line.get("tasks") if isinstance(line, dict) else None
        if not isinstance(tasks, list):
            raise ValueError(f"line {i}: not a sampled stage (a mapping with its tasks)")
        for t in tasks:
            if not (isinstance(t, dict) and isinstance(t.get("host"), str) and all(
                    isinstance(t.get(k), int | float) and not isinstance(t.get(k), bool)
                    and math.isfinite(t[k]) and t[k] >= 0 for k in ("ms", "records"))):
                raise ValueError(f"line {i}: a task needs a host, its ms and its records (numbers >= 0): {t!r}")


def summary(lines: list[dict], lmap: LatencyMap, site: str, outlier_factor: float = 5.0) -> dict[str, Any]:
    """Per node (RTT to `site`, median task ms and records, task count) and the least-squares fit
    ms = a + b * RTT + c * records with its R^2, over the tasks of `lines` whose host is a node of `lmap`, less
    those longer than `outlier_factor` times the median task (0: none left out; `left_out` counts them)."""
    if site not in lmap.names:
        raise ValueError(f"site {site!r} is not a node of the map ({', '.join(lmap.names)})")
    if not 0 <= outlier_factor < math.inf:
        raise ValueError(f"the outlier factor must be a number >= 0, got {outlier_factor}")
    check_lines(lines)
    by_host = {node_host(n, i): n for i, n in enumerate(lmap.names)}
    every = [(by_host[t["host"]], float(t["ms"]), float(t["records"])) for line in lines for t in line["tasks"]
             if t["host"] in by_host]
    cut = outlier_factor * statistics.median(ms for _, ms, _ in every) if every and outlier_factor else None
    rows = [r for r in every if cut is None or r[1] <= cut]
    nodes = {}
    for name in lmap.names:
        mine = [(ms, rec) for n, ms, rec in rows if n == name]
        if mine:
            nodes[name] = {"rtt_to_site_ms": lmap.rtt(name, site), "tasks": len(mine),
                           "median_ms": statistics.median(ms for ms, _ in mine),
                           "median_records": statistics.median(rec for _, rec in mine)}
    fit = None
    if len(rows) >= 4:
        x = np.array([[1.0, lmap.rtt(n, site), rec] for n, _, rec in rows])
        y = np.array([ms for _, ms, _ in rows])
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        ss = float(((y - y.mean()) ** 2).sum())
        r2 = 1.0 - float(((y - x @ coef) ** 2).sum()) / ss if ss > 0 else float("nan")
        fit = {"ms": float(coef[0]), "ms_per_rtt_ms": float(coef[1]), "ms_per_record": float(coef[2]), "r2": r2,
               "tasks": len(rows)}
    return {"site": site, "nodes": nodes, "fit": fit, "left_out": len(every) - len(rows),
            "left_out_above_ms": cut}


def main() -> None:
    """Sample or summarise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="poll the driver's UI and append its newest stages' tasks to --out")
    s.add_argument("--ui", default="http://127.0.0.1:15640", help="the driver's UI (spark.ui.port)")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--every", type=float, default=45.0, help="seconds between polls")
    s.add_argument("--stages", type=int, default=2, help="newest completed stages read per poll")
    s.add_argument("--polls", type=int, default=None, help="stop after this many polls [default: never]")
    m = sub.add_parser("summarise", help="per node and fitted: task time against RTT to the site and records")
    m.add_argument("file", type=Path)
    m.add_argument("--map", type=Path, required=True)
    m.add_argument("--site", required=True, help="the node hosting broker and driver")
    m.add_argument("--outlier-factor", type=float, default=5.0, help="leave out tasks longer than this many times "
                   "the median task (a new executor's cold start); 0: keep all")
    m.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    if args.cmd == "sample":
        if args.every <= 0 or args.stages < 1 or (args.polls is not None and args.polls < 1):
            ap.error("--every must be > 0, --stages and --polls at least 1")
        if not args.ui.startswith(("http://", "https://")):
            ap.error(f"--ui must be the driver UI's http:// address, got {args.ui!r}")
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends the sampling; what it wrote is kept
            sample(args.ui, args.out, args.every, args.stages, args.polls)
        return
    try:
        lines = [json.loads(x) for x in args.file.read_text().splitlines() if x.strip()]
        result = summary(lines, load_latency_map(args.map), args.site, args.outlier_factor)
    except (OSError, ValueError, UserError) as err:
        ap.error(f"summarise: {err}")
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{'node':<8} {'RTT to ' + args.site:>12} {'tasks':>6} {'median ms':>10} {'median records':>15}")
    for name, n in sorted(result["nodes"].items(), key=lambda kv: kv[1]["rtt_to_site_ms"]):
        print(f"{name:<8} {n['rtt_to_site_ms']:>12.1f} {n['tasks']:>6} {n['median_ms']:>10.0f} "
              f"{n['median_records']:>15.0f}")
    if (fit := result["fit"]) is not None:
        print(f"task ms = {fit['ms']:.0f} + {fit['ms_per_rtt_ms']:.1f} x RTT to {args.site} (ms) + "
              f"{fit['ms_per_record']:.2f} x records   (R^2 {fit['r2']:.2f}, {fit['tasks']} tasks)")
    if result["left_out"]:
        print(f"left out: {result['left_out']} task(s) longer than {result['left_out_above_ms']:.0f} ms "
              "(a new executor's cold start)")


if __name__ == "__main__":
    main()
