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
"""

from __future__ import annotations

import random
from typing import Any

from gesscale import placement
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
