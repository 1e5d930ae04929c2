"""Does placement matter live? MST of the nearest, the median random and the farthest placements on the
WAN-emulated testbed.

On one local testbed with the latency map emulated between the fog nodes and the site of broker and driver
(gesscale.testbed.wan), the capacity probe (gesscale.probe, controlled injection) measures the MST of, for
n = 2 and 3, the placement with the smallest ND_max (as the controller places), the median random placement
(the seeded draw at the median ND_max of uniformly drawn placements of n nodes: what a latency-unaware policy
gets half the time, gesscale.random_placement) and the one with the largest ND_max, then fits the performance
model (`--model-form`, default auto) on all but one configuration and predicts the one held out. Prints the MSTs,
each placement's ratio to the nearest, the fitted model and its error on the held-out placement.

With `--no-wan` the same runs on plain loopback (the control: there, placement cannot matter). `--query` runs
the job with another query (docs/queries.md), e.g. frequent-routes, whose replicas exchange data in a shuffle.
`--far 3` measures the farthest placement only for n = 3 (a shorter run; n = 1 has one placement: ND_max 0);
`--kinds near,median` leaves the farthest out altogether.

    .venv/bin/python benchmarks/bench_placement.py [--map inventory/latency/fog9.yaml] [--replicas 2,3]
        [--kinds near,median,far] [--far 2,3] [--node-cpu 0.25] [--no-wan] [--query nearest-landmark]
        [--model-form auto] [--out out/bench-placement]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gesscale import placement  # noqa: E402
from gesscale.latency_map import LatencyMap, load_latency_map  # noqa: E402
from gesscale.model import FORM_CHOICES  # noqa: E402
from gesscale.probe import ProbeResult  # noqa: E402
from gesscale.random_placement import median_random_nd_max, median_random_placement  # noqa: E402
from gesscale.testbed import DEFAULT_MAP  # noqa: E402
from gesscale.testbed.calibration import LocalCalibrationOptions, calibrate_local, testbed_nodes  # noqa: E402
from gesscale.testbed.probe_target import LIVE_PARAMS  # noqa: E402
from gesscale.testbed.wan import WanSettings  # noqa: E402


def extreme_placements(lmap: LatencyMap, n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The placement of n nodes with the smallest ND_max (the controller's greedy choice) and one with the
    largest (the farthest pair, completed by the nodes that keep the sum of RTTs largest). One node has no
    pair: its placements all have ND_max 0, so both are the near one."""
    near = tuple(placement.grow(lmap.graph(), [], lmap.names, n))
    if n == 1:
        return near, near
    a, b = max(itertools.combinations(lmap.names, 2), key=lambda p: lmap.rtt(*p))
    far = [a, b]
    while len(far) < n:
        far.append(max((v for v in lmap.names if v not in far), key=lambda v: sum(lmap.rtt(v, u) for u in far)))
    return near, tuple(sorted(far, key=lmap.names.index))


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", type=Path, default=DEFAULT_MAP)
    ap.add_argument("--replicas", default="2,3")
    ap.add_argument("--node-cpu", type=float, default=0.25)
    ap.add_argument("--no-wan", action="store_true", help="plain loopback (the control)")
    ap.add_argument("--site", default=None, help="node of the map hosting broker and driver [default: the centre]")
    ap.add_argument("--out", type=Path, default=Path("out/bench-placement"))
    ap.add_argument("--query", default="nearest-landmark", help="the job's query (docs/queries.md)")
    ap.add_argument("--far", default=None, help="replica counts whose farthest placement is measured "
                    "[default: all of --replicas]")
    ap.add_argument("--kinds", default="near,median,far", help="placements measured per n: near, median, far")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random placements (median)")
    ap.add_argument("--model-form", default="auto", choices=FORM_CHOICES, help="form of the model fitted")
    ap.add_argument("--repeats", type=int, default=1, help="measure every configuration this many times (the model "
                    "averages repeats; the ratios use their mean)")
    args = ap.parse_args()

    from gesscale.cli.query_option import checked_query
    from gesscale.errors import UserError

    try:
        query = checked_query(args.query)
    except UserError as err:
        ap.error(str(err))
    counts = [int(x) for x in args.replicas.split(",")]
    far_at = counts if args.far is None else [int(x) for x in args.far.split(",")]
    lmap = load_latency_map(args.map)
    kinds: dict[int, list[tuple[str, tuple[str, ...]]]] = {}
    configs: list[tuple[str, ...]] = []
    wanted = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if "near" not in wanted or not set(wanted) <= {"near", "median", "far"}:
        ap.error("--kinds: near, and any of median, far")
    for n in counts:
        near, far = extreme_placements(lmap, n)
        median = median_random_placement(lmap, lmap.names, n, args.seed)
        kinds[n] = [("near", near)]
        if n == 1:  # one replica has ND_max 0 wherever it is: the model cannot tell its placements apart
            configs += [near] if near not in configs else []
            continue
        if "median" in wanted and median != near:
            kinds[n].append(("median", median))
        if "far" in wanted and n in far_at and far != near and far != median:
            kinds[n].append(("far", far))
        configs += [c for _, c in kinds[n] if c not in configs]
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    opts = LocalCalibrationOptions(run_dir=args.out / "testbed", node_cpu=args.node_cpu, wan=not args.no_wan,
                                   site=args.site, port_shift=600, query=query)
    site = args.site or WanSettings(lmap).resolve_site(testbed_nodes(lmap, configs))
    print(f"query {query}; configurations: "
          f"{', '.join('+'.join(c) + f' (ND_max {lmap.nd_max(c):.1f} ms)' for c in configs)}; "
          f"broker and driver at {site}" + ("" if opts.wan else " (not emulated: --no-wan)"))
    t0 = time.monotonic()
    cal, timings = calibrate_local(opts, lmap, configs * args.repeats, LIVE_PARAMS, say=print, form=args.model_form,
                                   progress=lambda r: print(f"  {'+'.join(r.nodes)}: MST {r.mst:.0f}/s"))
    by_nodes: dict[tuple[str, ...], list[ProbeResult]] = {}
    for r in cal.results:
        by_nodes.setdefault(tuple(r.nodes), []).append(r)
    print(f"\nmeasured in {time.monotonic() - t0:.0f} s ({'emulated WAN' if opts.wan else 'plain loopback'}):")
    print(f"{'n':>2} {'kind':<6} {'placement':<28} {'ND_max ms':>9} {'MST /s':>9} {'/near':>6}")
    rows = []
    for n in counts:
        near = kinds[n][0][1]
        near_mst = sum(r.mst for r in by_nodes[near]) / len(by_nodes[near])
        for kind, cfg in kinds[n]:
            rs = by_nodes[cfg]
            mean = sum(r.mst for r in rs) / len(rs)
            ratio = mean / near_mst if kind != "near" and near_mst else None
            mst = " ".join(f"{r.mst:.0f}" if r.bounded else f">={r.mst:.0f}" for r in rs)
            print(f"{n:>2} {kind:<6} {'+'.join(cfg):<28} {rs[0].nd_max_ms:>9.1f} {mst:>9} "
                  f"{'' if ratio is None else f'{ratio:.3f}':>6}")
            rows.append({"n": n, "kind": kind, "nodes": list(cfg), "nd_max_ms": rs[0].nd_max_ms,
                         "mst": [r.mst for r in rs], "bounded": [r.bounded for r in rs], "over_near": ratio,
                         "median_random_nd_max_ms": median_random_nd_max(lmap, lmap.names, n, args.seed)})
    doc = {"query": query, "wan": opts.wan, "site": site, "node_cpu": args.node_cpu, "rows": rows,
           "calibration": cal.to_dict(), "timings_s": timings}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "placement.json").write_text(json.dumps(doc, indent=1, default=str))
    m = cal.model
    print(f"\nmodel ({m.form_reason_}): {m!r}")
    for form, loo in m.loo_errors().items():
        print(f"  leave-one-out {form:<13} median |error| {loo['median_abs']:.1%}, max {loo['max_abs']:.1%}, "
              f"rms {loo['rms']:.1%}")
    print(f"held-out check: {json.dumps(cal.holdout, default=str)}")
    print(f"written {args.out / 'placement.json'}")


if __name__ == "__main__":
    main()
