"""How large a latency map the controller takes: load, placement graph and one placement, time and peak memory.

For each size, a map of random European sites with RTTs derived from coordinates (derive: geo) is loaded,
turned into the placement graph, and a 5-node placement is grown on it, in a fresh process each (so the peak
memory is that size's own). Sizes above `gesscale.latency_map.MAX_NODES` are refused up front, which is shown too.

    .venv/bin/python benchmarks/bench_map_scale.py [--sizes 500,1000,2000,10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_ONE = """
import json, random, resource, sys, time
sys.path.insert(0, {root!r})
from gesscale import placement
from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
n = {n}; rng = random.Random(1)
doc = {{"nodes": {{f"n{{i}}": {{"lat": rng.uniform(35, 65), "lon": rng.uniform(-10, 30)}} for i in range(n)}},
       "derive": "geo"}}
out = {{"nodes": n}}
t0 = time.monotonic()
try:
    m = latency_map_from_dict(doc, "bench")
    t1 = time.monotonic(); g = m.graph(); t2 = time.monotonic()
    placement.grow(g, [], m.names, 5); t3 = time.monotonic()
    out.update(load_s=t1 - t0, graph_s=t2 - t1, place_s=t3 - t2, total_s=t3 - t0)
except UserError as err:
    out.update(refused=str(err), total_s=time.monotonic() - t0)
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def main() -> None:
    """Run each size in its own process and print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1000,2000,10000")
    args = ap.parse_args()
    print(f"{'nodes':>6} {'load s':>7} {'graph s':>8} {'place s':>8} {'total s':>8} {'peak MB':>8}  note")
    for n in (int(x) for x in args.sizes.split(",")):
        res = subprocess.run([sys.executable, "-c", _ONE.format(root=str(ROOT), n=n)], capture_output=True,
                             text=True, timeout=900)
        if res.returncode != 0:
            print(f"{n:>6} failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
            continue
        r = json.loads(res.stdout)
        if "refused" in r:
            print(f"{n:>6} {'':>7} {'':>8} {'':>8} {r['total_s']:>8.2f} {r['peak_mb']:>8.0f}  refused: {r['refused']}")
        else:
            print(f"{n:>6} {r['load_s']:>7.1f} {r['graph_s']:>8.1f} {r['place_s']:>8.1f} {r['total_s']:>8.1f} "
                  f"{r['peak_mb']:>8.0f}")


if __name__ == "__main__":
    main()
