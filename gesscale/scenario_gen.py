"""Random scenarios within stated ranges, feasible by construction (`gesscale scenarios generate`; issue 19).

The seven public scenarios share one map and one ground truth, so a policy can be shaped to them; these are
drawn afresh from a seed. Pure: returns scenario mappings (the YAML documents); the CLI writes them.

Ranges (uniform unless said otherwise):
- map: 5-30 sites in a European box (lat 36-60°, lon −10-30°), RTTs derived from the coordinates (`derive: geo`);
- cluster: n_max 3-min(12, sites), n_min 1, initial replicas 1-min(3, n_max), control period 30-120 s;
- ground truth: α 30-120 records/s, β 0.7-1.0, γ 0.01-0.2 records/s per ms, noise 0.01-0.08, pause 30-240 s;
- workload: every kind but csv in turn, 1.5-4 h, shaped from its peak P (below).
Feasible by construction: P = a share 0.5-0.85 of the true MST of the best placement of n_max replicas
(`placement.best_nd_max_by_size`), and each kind's parameters keep its expected rate ≤ P (noisy kinds by their
noise), so the peak is sustainable at n_max; γ is redrawn until MST(n_max) ≥ 1.5 MST(1) (scaling out pays).

`generate_fog` (`--nodes N`) draws one day on a large fog instead: N sites clustered around real metro areas, a
derived map, max_replicas 64 and a daily cosine whose peak needs 40 replicas (issue 31).
"""

from __future__ import annotations

import math
import random
from typing import Any

from gesscale import placement
from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from gesscale.scenario import GroundTruth
from gesscale.workloads import TAXI_HOURLY_SHARE

KINDS = ("taxi", "cosine", "random", "increasing", "decreasing", "spike", "steps")


def _truth(rnd: random.Random) -> dict[str, float]:
    return {
        "alpha": round(rnd.uniform(30, 120), 1),
        "beta": round(rnd.uniform(0.7, 1.0), 3),
        "gamma": round(rnd.uniform(0.01, 0.2), 3),
        "noise": round(rnd.uniform(0.01, 0.08), 3),
        "reconfig_pause_s": float(rnd.randint(30, 240)),
    }


def _workload(kind: str, peak: float, rnd: random.Random) -> dict[str, Any]:
    """One workload of `kind` whose expected rate never exceeds `peak` records/s."""
    duration = rnd.randint(90, 240) * 60
    if kind == "taxi":
        speed = round(rnd.uniform(12, 32), 1)
        dup = rnd.randint(1, 3)
        per_day = int(peak / (max(TAXI_HOURLY_SHARE) / 3600.0 * speed * dup))
        return {"kind": "taxi", "speed": speed, "duplication": dup, "days": 2, "rides_per_day": per_day,
                "start_hour": rnd.randint(0, 23)}
    if kind == "cosine":
        noise = round(rnd.uniform(0.0, 0.05), 3)
        mean = peak * rnd.uniform(0.45, 0.6)
        amp = peak / (1.0 + 2.0 * noise) - mean
        return {"kind": "cosine", "mean": round(mean, 1), "amplitude": round(max(0.0, amp), 1),
                "period_s": rnd.randint(1800, 7200), "noise": noise, "duration_s": duration}
    if kind == "random":
        spread = peak * rnd.uniform(0.3, 0.45)
        return {"kind": "random", "mean": round(peak - spread, 1), "spread": round(spread, 1),
                "jump_prob": round(rnd.uniform(0.001, 0.01), 4), "step": round(rnd.uniform(0.01, 0.04), 3),
                "duration_s": duration}
    if kind in ("increasing", "decreasing"):
        low = round(peak * rnd.uniform(0.05, 0.3), 1)
        start, end = (low, round(peak, 1)) if kind == "increasing" else (round(peak, 1), low)
        return {"kind": kind, "start": start, "end": end, "duration_s": duration}
    if kind == "spike":
        return {"kind": "spike", "base": round(peak * rnd.uniform(0.2, 0.5), 1), "peak": round(peak, 1),
                "at_s": int(duration * rnd.uniform(0.1, 0.6)), "width_s": rnd.randint(300, 2400),
                "duration_s": duration}
    levels = [round(peak * rnd.uniform(0.1, 1.0), 1) for _ in range(rnd.randint(4, 10))]
    levels[rnd.randrange(len(levels))] = round(peak, 1)
    return {"kind": "steps", "levels": levels, "step_s": duration // len(levels)}


def generate_one(index: int, rnd: random.Random) -> tuple[dict[str, Any], str]:
    """One scenario document (see the module docstring for the ranges) and a note on its peak."""
    sites = rnd.randint(5, 30)
    nodes = {f"s{i:02d}": {"lat": round(rnd.uniform(36, 60), 3), "lon": round(rnd.uniform(-10, 30), 3)}
             for i in range(sites)}
    lmap = latency_map_from_dict({"nodes": nodes, "derive": "geo"}, f"generated {index}")
    n_max = rnd.randint(3, min(12, sites))
    nds = placement.best_nd_max_by_size(lmap.placement_graph(), lmap.names, n_max)
    truth = _truth(rnd)
    for _ in range(100):  # scaling out must pay: redraw γ until MST(n_max) ≥ 1.5 MST(1)
        gt = GroundTruth(truth["alpha"], truth["beta"], truth["gamma"])
        if gt.mst(n_max, nds[n_max]) >= 1.5 * gt.mst(1, nds[1]):
            break
        truth["gamma"] = round(truth["gamma"] / 2, 4)
    capacity = GroundTruth(truth["alpha"], truth["beta"], truth["gamma"]).mst(n_max, nds[n_max])
    kind = KINDS[index % len(KINDS)]
    peak = capacity * rnd.uniform(0.5, 0.85)
    initial = rnd.randint(1, min(3, n_max))
    return {
        "name": f"gen-{index:03d}-{kind}",
        "control_period_s": float(rnd.choice((30, 60, 60, 90, 120))),
        "cluster": {"nodes": nodes, "derive": "geo", "min_replicas": 1, "max_replicas": n_max},
        "operator": {**truth, "initial_replicas": initial},
        "workload": _workload(kind, peak, rnd),
        "seed": rnd.randint(1, 10_000),
    }, f"peak {peak:.1f} records/s = {peak / capacity:.2f} x the true MST of n_max = {n_max} ({capacity:.1f})"


def generate(count: int, seed: int) -> list[tuple[dict[str, Any], str]]:
    """`count` (scenario document, one-line note on its feasibility) from `seed` (same seed, same documents)."""
    rnd = random.Random(seed)
    return [generate_one(i, rnd) for i in range(count)]


# Metro areas fog sites gather around (approximate city-centre coordinates): Europe, North America, Asia. Sites are
# drawn around them, not uniformly in a box: a few large metros hold most sites, as real edge deployments do.
METROS = (
    (51.51, -0.13), (48.86, 2.35), (52.52, 13.40), (40.42, -3.70), (41.90, 12.50), (52.37, 4.90), (50.85, 4.35),
    (48.21, 16.37), (59.33, 18.07), (60.17, 24.94), (55.68, 12.57), (59.91, 10.75), (52.23, 21.01), (50.08, 14.44),
    (47.50, 19.04), (45.46, 9.19), (53.35, -6.26), (38.72, -9.14), (37.98, 23.73), (44.43, 26.10), (63.83, 20.26),
    (40.71, -74.01), (41.88, -87.63), (34.05, -118.24), (37.77, -122.42), (47.61, -122.33), (43.65, -79.38),
    (29.76, -95.37), (25.76, -80.19), (35.68, 139.69), (37.57, 126.98), (1.35, 103.82), (22.32, 114.17),
    (19.08, 72.88), (-33.87, 151.21), (-23.55, -46.63),
)
FOG_MAX_REPLICAS = 64
FOG_PEAK_REPLICAS = 40  # the workload's peak needs this many replicas of the best placement (at least 32)
# A fog of thousands of sites is steered every 2 minutes (the generated scenarios use 30-120 s). The day's cost is
# then mostly the `optimal` reference's programme, which grows with periods x counts x pause states x bins:
# at 60 s it alone takes about a minute with max_replicas 64 (docs/map-scale.md).
FOG_CONTROL_PERIOD_S = 120.0


def fog_sites(n: int, rnd: random.Random) -> dict[str, dict[str, Any]]:
    """n fog sites around the metros: metro sizes Zipf-like (weight 1/rank), sites Gaussian around the centre
    (sigma 15-60 km per metro), a few percent scattered up to 300 km away (rural sites)."""
    order = list(METROS)
    rnd.shuffle(order)
    weights = [1.0 / (k + 1) for k in range(len(order))]
    spread = [rnd.uniform(15, 60) for _ in order]
    sites: dict[str, dict[str, Any]] = {}
    width = len(str(n - 1))
    for i in range(n):
        m = rnd.choices(range(len(order)), weights)[0]
        lat0, lon0 = order[m]
        sigma_km = spread[m] if rnd.random() > 0.05 else 300.0
        dlat = rnd.gauss(0.0, sigma_km) / 111.0
        dlon = rnd.gauss(0.0, sigma_km) / (111.0 * max(0.2, math.cos(math.radians(lat0))))
        lat = max(-89.0, min(89.0, lat0 + dlat))
        lon = (lon0 + dlon + 180.0) % 360.0 - 180.0
        sites[f"f{i:0{width}d}"] = {"region": f"metro{m:02d}", "lat": round(lat, 4), "lon": round(lon, 4)}
    return sites


def generate_fog(nodes: int, seed: int) -> tuple[dict[str, Any], str]:
    """One day on a fog of `nodes` sites (`gesscale scenarios generate --nodes N`): a scenario document and a note.

    The map is `derive: geo` over `fog_sites`; max_replicas 64; control period 120 s; the ground truth is drawn
    as in `generate`, with γ halved until scaling out pays up to 64 replicas; the workload is a daily cosine
    (24 h, period 24 h) whose peak needs FOG_PEAK_REPLICAS (40) replicas of the best placement: more than the true
    MST of 39, at most that of 40.
    """
    if nodes < FOG_MAX_REPLICAS:
        raise UserError(f"--nodes {nodes}: a fog needs at least {FOG_MAX_REPLICAS} nodes (max_replicas)")
    rnd = random.Random(seed)
    sites = fog_sites(nodes, rnd)
    lmap = latency_map_from_dict({"nodes": sites, "derive": "geo"}, f"fog {nodes}")
    nds = placement.best_nd_max_by_size(lmap.placement_graph(), lmap.names, FOG_MAX_REPLICAS)
    truth = _truth(rnd)
    truth["alpha"] = round(rnd.uniform(30, 120), 1)
    for _ in range(100):  # scaling out must pay: the true MST grows up to 64 replicas
        gt = GroundTruth(truth["alpha"], truth["beta"], truth["gamma"])
        msts = [gt.mst(k, nds[k]) for k in range(1, FOG_MAX_REPLICAS + 1)]
        if all(b > a for a, b in zip(msts, msts[1:], strict=False)):
            break
        truth["gamma"] = round(truth["gamma"] / 2, 4)
    gt = GroundTruth(truth["alpha"], truth["beta"], truth["gamma"])
    low, high = gt.mst(FOG_PEAK_REPLICAS - 1, nds[FOG_PEAK_REPLICAS - 1]), gt.mst(FOG_PEAK_REPLICAS,
                                                                                 nds[FOG_PEAK_REPLICAS])
    noise = 0.02
    peak = round(low + (high - low) * rnd.uniform(0.2, 0.8), 1)  # the expected peak: mean + amplitude
    mean = round(peak * rnd.uniform(0.45, 0.6), 1)
    doc = {
        "name": f"fog-{nodes}-seed{seed}",
        "control_period_s": FOG_CONTROL_PERIOD_S,
        "cluster": {"nodes": sites, "derive": "geo", "min_replicas": 1, "max_replicas": FOG_MAX_REPLICAS},
        "operator": {**truth, "initial_replicas": 2},
        "workload": {"kind": "cosine", "mean": mean, "amplitude": round(peak - mean, 1), "period_s": 86400,
                     "noise": noise, "duration_s": 86400},
        "seed": rnd.randint(1, 10_000),
    }
    return doc, (f"{nodes} fog sites around {len(METROS)} metros; peak {peak:.1f} records/s needs "
                 f"{FOG_PEAK_REPLICAS} replicas (true MST of 39: {low:.1f}, of 40: {high:.1f})")
