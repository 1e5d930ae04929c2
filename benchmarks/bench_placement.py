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
`--kinds near,median` leaves the farthest out altogether. `--only fog3+fog1,...` measures some of the
configurations again; `--analyse FILE...` measures nothing and fits every form on earlier runs' placement.json
(a censored repeat is left out where the same configuration was bounded), printing each form's leave-one-out
errors and each far placement held out; with `--predict FILE...` as well, every form fitted on the `--analyse`
files predicts each configuration of the `--predict` files (out of sample: other replica counts, another day).

    .venv/bin/python benchmarks/bench_placement.py [--map inventory/latency/fog9.yaml] [--replicas 2,3]
        [--kinds near,median,far] [--far 2,3] [--node-cpu 0.25] [--no-wan] [--query nearest-landmark]
        [--model-form auto] [--model-latency nd_max] [--repeats 2] [--only NODES,...] [--out out/bench-placement]
    .venv/bin/python benchmarks/bench_placement.py --analyse out/bench-placement/placement.json [...]
        [--predict other/placement.json ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gesscale import placement  # noqa: E402
from gesscale.errors import UserError  # noqa: E402
from gesscale.latency_map import LatencyMap, load_latency_map  # noqa: E402
from gesscale.model import FORM_CHOICES, MODEL_LATENCIES  # noqa: E402
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
    ap.add_argument("--model-latency", default="nd_max", choices=MODEL_LATENCIES,
                    help="the latency of the run's model: nd_max, or site (the farthest RTT to the site); the "
                         "report prints every form with both")
    ap.add_argument("--repeats", type=int, default=1, help="measure every configuration this many times (the model "
                    "averages repeats; the ratios use their mean)")
    ap.add_argument("--only", default=None, help="measure only these of the configurations, e.g. fog3+fog1,fog4+fog6 "
                    "(to measure some again; combine the files with --analyse)")
    ap.add_argument("--analyse", type=Path, nargs="+", default=None, metavar="PLACEMENT_JSON",
                    help="measure nothing: fit every form on the measurements of these files (placement.json of "
                    "earlier runs; a censored search is left out where the same configuration was bounded) and "
                    "print the leave-one-out errors and each far placement held out")
    ap.add_argument("--predict", type=Path, nargs="+", default=None, metavar="PLACEMENT_JSON",
                    help="with --analyse: every form fitted on the --analyse files predicts each configuration "
                    "of these (an out-of-sample check; same map and site)")
    args = ap.parse_args()
    if args.predict and not args.analyse:
        ap.error("--predict needs --analyse (the files the forms are fitted on)")
    if args.analyse:
        try:
            analyse_runs(args.map, args.analyse, args.predict or [])
        except (OSError, ValueError, UserError) as err:
            ap.error(f"--analyse: {err}")
        return

    from gesscale.cli.query_option import checked_query

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
    if args.only:
        only = {tuple(c.split("+")) for c in args.only.split(",") if c.strip()}
        if unknown := only - set(configs):
            ap.error(f"--only: {', '.join('+'.join(c) for c in sorted(unknown))} not among the configurations "
                     f"({', '.join('+'.join(c) for c in configs)})")
        configs = [c for c in configs if c in only]
        kinds = {n: [(k, c) for k, c in ks if c in only] for n, ks in kinds.items()}
        kinds = {n: ks for n, ks in kinds.items() if ks}
        counts = [n for n in counts if n in kinds]
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
                                   latency=args.model_latency,
                                   progress=lambda r: print(f"  {'+'.join(r.nodes)}: MST {r.mst:.0f}/s"))
    by_nodes: dict[tuple[str, ...], list[ProbeResult]] = {}
    for r in cal.results:
        by_nodes.setdefault(tuple(r.nodes), []).append(r)
    print(f"\nmeasured in {time.monotonic() - t0:.0f} s ({'emulated WAN' if opts.wan else 'plain loopback'}):")
    print(f"{'n':>2} {'kind':<6} {'placement':<28} {'ND_max ms':>9} {'MST /s':>9} {'/near':>6}")
    rows = []
    for n in counts:
        near = kinds[n][0][1]
        near_rs = by_nodes.get(near, [])
        near_mst = sum(r.mst for r in near_rs) / len(near_rs) if near_rs else 0.0
        for kind, cfg in kinds[n]:
            rs = by_nodes[cfg]
            mean = sum(r.mst for r in rs) / len(rs)
            ratio = mean / near_mst if kind != "near" and near_mst else None
            mst = " ".join(f"{r.mst:.0f}" if r.bounded else f">={r.mst:.0f}" for r in rs)
            print(f"{n:>2} {kind:<6} {'+'.join(cfg):<28} {rs[0].nd_max_ms:>9.1f} {mst:>9} "
                  f"{'' if ratio is None else f'{ratio:.3f}':>6}")
            rows.append({"n": n, "kind": kind, "nodes": list(cfg), "nd_max_ms": rs[0].nd_max_ms,
                         "site_rtt_ms": site_rtt(lmap, cfg, site),
                         "mst": [r.mst for r in rs], "bounded": [r.bounded for r in rs], "over_near": ratio,
                         "remeasured_from": [r.remeasured_from for r in rs],
                         "median_random_nd_max_ms": median_random_nd_max(lmap, lmap.names, n, args.seed)})
    doc = {"query": query, "wan": opts.wan, "site": site, "node_cpu": args.node_cpu, "rows": rows,
           "calibration": cal.to_dict(), "timings_s": timings}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "placement.json").write_text(json.dumps(doc, indent=1, default=str))
    m = cal.model
    print(f"\nmodel ({m.form_reason_}): {m!r}")
    print(f"held-out check: {json.dumps(cal.holdout, default=str)}")
    print_model_report(rows)
    print_model_report(rows, variable="site_rtt_ms")
    print(f"written {args.out / 'placement.json'}")


def analyse_runs(map_path: Path, files: list[Path], predict: list[Path]) -> None:
    """`--analyse FILES [--predict OTHERS]`: every form's errors on the runs of `files`, with each latency
    variable, and their predictions of the configurations of `predict`; ValueError, OSError or UserError (one
    line each) when a file is not a placement.json of the map at `map_path`, or the two sets' sites differ."""
    lmap = load_latency_map(map_path)
    rows, site = rows_of(files, lmap)
    tests, other = rows_of(predict, lmap) if predict else ([], site)
    if other != site:
        raise ValueError(f"--predict's files have another site ({other}, not {site})")
    for variable in VARIABLES:
        print_model_report(rows, variable=variable)
        if tests:
            print_predictions(rows, tests, variable)


def rows_of(files: list[Path], lmap: LatencyMap) -> tuple[list[dict], str]:
    """The combined rows of some runs' placement.json (`combine_rows`), each with its `site_rtt_ms`, and their
    site; ValueError when the files name different sites or none, or `lmap` is not their map."""
    docs = [json.loads(f.read_text()) for f in files]
    for f, doc in zip(files, docs, strict=True):
        check_placement_doc(doc, str(f))
    rows = combine_rows(docs)
    sites = {d["site"] for d in docs}
    if len(sites) != 1:
        raise ValueError(f"the files name different sites or none ({sorted(map(str, sites))})")
    site = str(sites.pop())
    with_site_rtts(rows, lmap, site)
    return rows, site


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def check_placement_doc(doc: object, name: str) -> None:
    """ValueError naming the file, row and key unless `doc` is a placement.json as this benchmark writes it: a
    `site` (a node's name) and `rows`, each with `n` (>= 1, as many as its `nodes`, names), its `kind`,
    `nd_max_ms` and `mst` (a list of numbers >= 0) and, if given, `bounded` (a bool per MST)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("site"), str) or not isinstance(doc.get("rows"), list):
        raise ValueError(f"{name}: not a placement.json (a mapping with a site and rows)")
    for i, row in enumerate(doc["rows"]):
        where = f"{name}: row {i}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: not a mapping")
        nodes, n, mst = row.get("nodes"), row.get("n"), row.get("mst")
        if not isinstance(nodes, list) or not nodes or not all(isinstance(v, str) for v in nodes):
            raise ValueError(f"{where}: 'nodes' must be a list of node names")
        if not isinstance(n, int) or isinstance(n, bool) or n != len(nodes):
            raise ValueError(f"{where}: 'n' must be the number of its nodes ({len(nodes)}), got {n!r}")
        if row.get("kind") not in ("near", "median", "far"):
            raise ValueError(f"{where}: 'kind' must be near, median or far, got {row.get('kind')!r}")
        if not _number(row.get("nd_max_ms")):
            raise ValueError(f"{where}: 'nd_max_ms' must be a number >= 0, got {row.get('nd_max_ms')!r}")
        if not isinstance(mst, list) or not all(_number(m) for m in mst):
            raise ValueError(f"{where}: 'mst' must be a list of numbers >= 0")
        bounded = row.get("bounded", [True] * len(mst))
        if not isinstance(bounded, list) or len(bounded) != len(mst) or not all(isinstance(b, bool) for b in bounded):
            raise ValueError(f"{where}: 'bounded' must be a true/false per MST")


def combine_rows(docs: list[dict]) -> list[dict]:
    """The rows of several runs' placement.json, one per configuration: every bounded measurement of it; its
    censored ones (a lower bound only) are kept only when no run bounded it, and then marked."""
    by_nodes: dict[tuple[str, ...], dict] = {}
    for doc in docs:
        for row in doc["rows"]:
            key = tuple(row["nodes"])
            out = by_nodes.setdefault(key, {**row, "mst": [], "bounded": []})
            out["mst"] += list(row["mst"])
            out["bounded"] += list(row.get("bounded", [True] * len(row["mst"])))
    rows = []
    for row in by_nodes.values():
        pairs = list(zip(row["mst"], row["bounded"], strict=True))
        if any(b for _, b in pairs):
            pairs = [p for p in pairs if p[1]]
        rows.append({**row, "mst": [m for m, _ in pairs], "bounded": [b for _, b in pairs]})
    return sorted(rows, key=lambda r: (r["n"], r["nd_max_ms"]))


def site_rtt(lmap: LatencyMap, nodes: tuple[str, ...] | list[str], site: str) -> float:
    """The controllers' `model_latency: site` of a placement (`gesscale.site_view`): the largest RTT (ms) from one
    of its nodes to the site (broker and driver), 0 for one replica as ND_max."""
    from gesscale.site_view import SiteView

    return SiteView(lmap, site).nd_max(nodes)


def with_site_rtts(rows: list[dict], lmap: LatencyMap, site: str) -> None:
    """Give every row its `site_rtt_ms` from `lmap` (the run's map: ValueError if its ND_max disagree with the
    rows', or a node or the site is not in it)."""
    missing = sorted({v for r in rows for v in r["nodes"]} - set(lmap.names) | ({site} - set(lmap.names)))
    if missing:
        raise ValueError(f"{', '.join(missing)} not in the map {lmap.source}: give the run's --map")
    for r in rows:
        if abs(lmap.nd_max(r["nodes"]) - r["nd_max_ms"]) > 0.05:
            raise ValueError(f"{'+'.join(r['nodes'])}: ND_max {r['nd_max_ms']} ms in the file, "
                             f"{lmap.nd_max(r['nodes']):g} ms on {lmap.source}: give the run's --map")
        r["site_rtt_ms"] = site_rtt(lmap, r["nodes"], site)


VARIABLES = {"nd_max_ms": "ND_max (the paper's variable)",
             "site_rtt_ms": "the farthest RTT to the site in place of ND_max"}


def print_model_report(rows: list[dict], variable: str = "nd_max_ms") -> None:
    """Every form's leave-one-out errors over the configurations of `rows` (repeats averaged), what `auto`
    chooses, and each far placement held out with all its repeats: fitted on the others (each form, and `auto`
    choosing among them on the others alone), predicted, compared with its mean measured MST.

    `variable` is the latency the forms take: `nd_max_ms` (the model's), or `site_rtt_ms`, the farthest RTT from
    a replica to the site (broker and driver), which the forms fit the same way in its place (the controllers'
    `model_latency: site`, `gesscale.site_view`)."""
    from gesscale.model import AUTO, FORMS, Measurement, PerformanceModel

    points = [Measurement(r["n"], r[variable], m) for r in rows for m in r["mst"] if m > 0]
    censored = sum(1 for r in rows for b in r["bounded"] if not b)
    print(f"\nmodel forms with {VARIABLES[variable]}, on {len(rows)} configurations, {len(points)} measurements"
          f"{f', {censored} censored (a lower bound only)' if censored else ', none censored'}:")
    auto = PerformanceModel(form=AUTO).fit(points)
    print(f"  auto: {auto.form_reason_}")
    for form, loo in auto.loo_errors().items():
        errs = " ".join(f"{e:+.1%}" for e in loo["errors"])
        print(f"  {form:<13} leave-one-out median |error| {loo['median_abs']:.1%}, max {loo['max_abs']:.1%}, "
              f"rms {loo['rms']:.1%}   ({errs})")
    for row in rows:
        if row["kind"] != "far" or not row["mst"]:
            continue
        measured = sum(row["mst"]) / len(row["mst"])
        train = [p for p in points if not (p.n == row["n"] and round(p.nd_max_ms, 1) == round(row[variable], 1))]
        cells = []
        for form in (AUTO, *FORMS):
            m = PerformanceModel(form=form).fit(train)
            err = (m.predict(row["n"], row[variable]) - measured) / measured
            cells.append(f"{form if form != AUTO else 'auto (' + m.form_ + ')'} {err:+.1%}")
        print(f"  far n = {row['n']} {'+'.join(row['nodes'])} ({variable} {row[variable]:.1f} ms, measured "
              f"{measured:.0f}/s) held out: " + ", ".join(cells))


def print_predictions(train: list[dict], tests: list[dict], variable: str = "nd_max_ms") -> None:
    """Every form (and `auto`) fitted on all of `train` predicts each configuration of `tests`: its error against
    the mean measured there, and the mean absolute error per form. A configuration measured in both is predicted
    all the same (it is then no test of extrapolation: marked)."""
    from gesscale.model import AUTO, FORMS, Measurement, PerformanceModel

    points = [Measurement(r["n"], r[variable], m) for r in train for m in r["mst"] if m > 0]
    known = {tuple(r["nodes"]) for r in train}
    models = {form: PerformanceModel(form=form).fit(points) for form in (AUTO, *FORMS)}
    print(f"  out of sample, fitted on these {len(points)} measurements, each configuration of the other files:")
    errors: dict[str, list[float]] = {form: [] for form in models}
    for row in tests:
        if not row["mst"]:
            continue
        measured = sum(row["mst"]) / len(row["mst"])
        cells = []
        for form, m in models.items():
            err = (m.predict(row["n"], row[variable]) - measured) / measured
            errors[form].append(abs(err))
            cells.append(f"{form if form != AUTO else 'auto (' + m.form_ + ')'} {err:+.1%}")
        seen = " (also among the fitted)" if tuple(row["nodes"]) in known else ""
        print(f"    n = {row['n']} {row['kind']} {'+'.join(row['nodes'])} ({variable} {row[variable]:.1f} ms, measured "
              f"{measured:.0f}/s, {len(row['mst'])} repeat(s)){seen}: " + ", ".join(cells))
    print("    mean |error|: " + ", ".join(f"{f} {sum(e) / len(e):.1%}" for f, e in errors.items() if e))


if __name__ == "__main__":
    main()
