"""How large a latency map the controller takes: load, memory, one decision, a node's plan, a simulated day.

For each size, fog sites clustered around metro areas (`gesscale.scenario_gen.fog_sites`, seed 1) make two maps:
derived from coordinates (`derive: geo`) and measured-dense (the same RTTs written as an int32 `.npy` matrix and
loaded through `rtt_matrix:`). Each figure comes from a fresh process, so each peak RSS is that step's own:

- load: `latency_map_from_dict` with its checks, wall seconds and peak RSS of the process;
- decide: one scale-up decision, placement included (the policy's `decide`, then `policies.base.place`), for
  gesscale and gesscale-plus with max_replicas 8 and 64, at the worst step (max_replicas − 1 replicas, the
  greedy set, scaling to max_replicas): CPU seconds, median of 20 (the first, with no row cached, beside it);
- plan: `netem.plan.build_plan` for one node (a rule per peer) and its apply script, CPU seconds;
- day (with --day N): `gesscale scenarios generate --nodes N`, then `gesscale simulate -p gesscale-plus -n 1` on
  it, which also runs the references optimal and ideal: wall seconds of each.

    .venv/bin/python benchmarks/bench_map_scale.py [--sizes 1000,10000,50000] [--day 10000] [--out DIR]

The dense 50 000-node map would hold 10 GB and is not built (its load line says so).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DENSE_MAX = 20_000  # above, the dense matrix (4 bytes per pair) is not built here

_COMMON = """
import json, random, resource, statistics, sys, time
sys.path.insert(0, {root!r})
from gesscale.latency_map import latency_map_from_dict
from gesscale.scenario_gen import fog_sites
n, kind, work = {n}, {kind!r}, {work!r}
sites = fog_sites(n, random.Random(1))
if kind == "geo":
    doc = {{"nodes": sites, "derive": "geo"}}
else:
    doc = {{"nodes": list(sites), "rtt_matrix": work + f"/dense{{n}}.npy"}}
def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""

_LOAD = _COMMON + """
before = rss_mb()
t0 = time.monotonic()
m = latency_map_from_dict(doc, "bench")
t1 = time.monotonic()
print(json.dumps({{"load_s": t1 - t0, "peak_mb": rss_mb(), "before_mb": before, "warnings": len(m.warnings)}}))
"""

_WRITE = _COMMON + """
from gesscale.latency_map import write_rtt_matrix
import numpy as np
from gesscale.rtt_table import DenseRtts
m = latency_map_from_dict({{"nodes": sites, "derive": "geo"}}, "bench")
out = np.empty((n, n), dtype=np.int32)
for i in range(n):
    out[i] = np.rint(m.row(i) * 1000)
np.save(work + f"/dense{{n}}.npy", out)
print(json.dumps({{"written": n}}))
"""

_DECIDE = _COMMON + """
from gesscale import placement
from gesscale.config import ControllerConfig
from gesscale.model import Measurement
from gesscale.observation import Observation
from gesscale.policies.base import PolicyContext, make_policy, place
import random as _r
m = latency_map_from_dict(doc, "bench")
out = {{}}
cands = tuple(m.names)
g = m.placement_graph()
for k in (8, 64):
    t0 = time.process_time()
    current = tuple(placement.grow(g, [], cands, k - 1))
    out[f"setup{{k}}_s"] = time.process_time() - t0
    nd = m.nd_max(current)
    for pid in ("gesscale", "gesscale-plus"):
        times = []
        for rep in range(21):
            pol = make_policy(pid)
            if pid == "gesscale-plus":
                for size in (1, 2, 4, 8):
                    pol.model.add(Measurement(size, 10.0 * size, 100.0 * size ** 0.9))
            else:
                for size in (1, 2, 4):
                    pol.model.add(Measurement(size, 10.0 * size, 100.0 * size ** 0.9))
            obs = Observation(time_s=3600.0, period_s=60.0, input_rate=1e6, throughput=100.0 * (k - 1),
                              backlog=1e7, backlog_growth=1e6, bp_upstream=1.0, bp_operator=0.0, replicas=current,
                              nd_max_ms=nd, cpu=1.0, busy=1.0, paused_s=0.0)
            ctx = PolicyContext(graph=g, candidates=cands, config=ControllerConfig(max_replicas=k),
                                rng=_r.Random(1), since_reconfig_s=1e9)
            t0 = time.process_time()
            d = place(pol.decide(obs, ctx), current, ctx, True)
            times.append(time.process_time() - t0)
            assert len(d.add) == 1, (pid, k, d)
        out[f"{{pid}}@{{k}}_cold_s"] = times[0]
        out[f"{{pid}}@{{k}}_s"] = statistics.median(times[1:])
out["peak_mb"] = rss_mb()
print(json.dumps(out))
"""

_PLAN = _COMMON + """
from netem.plan import build_plan
m = latency_map_from_dict(doc, "bench")
names = m.names
addresses = {{a: f"10.{{i // 65536 % 256}}.{{i // 256 % 256}}.{{i % 256}}" for i, a in enumerate(names)}}
devices = {{a: "eth0" for a in names}}
t0 = time.process_time()
plans = build_plan(m, addresses, devices, nodes=[names[0]])
script = plans[names[0]].apply_script()
t1 = time.process_time()
print(json.dumps({{"plan_s": t1 - t0, "script_kb": len(script) / 1024, "peak_mb": rss_mb()}}))
"""


def _run(code: str, timeout: int = 1800) -> dict:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        tail = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else str(res.returncode)
        return {"error": tail}
    return json.loads(res.stdout.strip().splitlines()[-1])


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    return f"{x * 1000:.1f} ms" if unit == "ms" else f"{x:.2f}"


def main() -> None:
    """Run each step in its own process and print one table (markdown, for docs/map-scale.md)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--day", type=int, default=0, help="also simulate a day on a generated fog of this many nodes")
    ap.add_argument("--out", default=None, help="folder for the .npy matrices and the day's scenario (a temp dir)")
    args = ap.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-map-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| nodes | map | load s | load peak MB | decision CPU: median of 20 (first) | plan of one node "
          "| decide peak MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (int(x) for x in args.sizes.split(",")):
        for kind in ("geo", "dense"):
            fill = {"root": str(ROOT), "n": n, "kind": kind, "work": str(work)}
            if kind == "dense" and n > DENSE_MAX:
                print(f"| {n} | dense | - | - | not built: {4 * n * n / 1e9:.0f} GB of int32 | - | - |")
                continue
            if kind == "dense":
                _run(_WRITE.format(**{**fill, "kind": "geo"}))
            load = _run(_LOAD.format(**fill))
            dec = _run(_DECIDE.format(**fill))
            plan = _run(_PLAN.format(**fill))
            if "error" in load:
                print(f"| {n} | {kind} | failed: {load['error']} | | | | |")
                continue
            parts = []
            for pid in ("gesscale", "gesscale-plus"):
                for k in (8, 64):
                    key = f"{pid}@{k}"
                    if key + "_s" in dec:
                        parts.append(f"{pid} {k}: {_fmt(dec[key + '_s'], 'ms')} ({_fmt(dec[key + '_cold_s'], 'ms')})")
            decided = "; ".join(parts) if parts else f"failed: {dec.get('error')}"
            planned = (f"{_fmt(plan['plan_s'], 'ms')}, {plan['script_kb']:.0f} kB" if "plan_s" in plan
                       else f"failed: {plan.get('error')}")
            print(f"| {n} | {kind} | {load['load_s']:.2f} | {load['peak_mb']:.0f} | {decided} | {planned} | "
                  f"{dec.get('peak_mb', 0):.0f} |", flush=True)
    if args.day:
        env_path = f"PYTHONPATH={ROOT}"
        gesscale = [sys.executable, "-m", "gesscale"]
        t0 = time.monotonic()
        subprocess.run([*gesscale, "scenarios", "generate", "--nodes", str(args.day), "--out", str(work)], check=True,
                       capture_output=True, cwd=ROOT)
        t1 = time.monotonic()
        scen = next(work.glob(f"fog-{args.day}-seed1.yaml"))
        res = subprocess.run(["/usr/bin/time", "-v", *gesscale, "simulate", "-s", str(scen), "-p", "gesscale-plus",
                              "-n", "1", "--json", str(work / "day.json")], capture_output=True, text=True, cwd=ROOT)
        t2 = time.monotonic()
        peak = next((line.split(":")[-1].strip() for line in res.stderr.splitlines() if "Maximum resident" in line),
                    "0")
        print(f"\nday on {args.day} nodes ({env_path}): generate {t1 - t0:.1f} s wall; simulate gesscale-plus with "
              f"optimal and ideal {t2 - t1:.1f} s wall, peak RSS {int(peak) / 1024:.0f} MB, exit {res.returncode}")


if __name__ == "__main__":
    main()
