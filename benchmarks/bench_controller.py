"""Controller speed: one decision (analyse + plan + placement) among 1,000 candidate nodes, simulated
seconds per wall-clock second for one policy on the taxi scenario, and the wall time of the `optimal` reference
(its dynamic programme, then its whole simulated run) on the taxi scenario.

Targets (issue 2): <= 50 ms per decision, >= 100,000 simulated s per wall s; (issue 19) optimal <= 10 s.
Prints what it measures; the machine is shared, so read the figures as one run's, not as constants.

    .venv/bin/python benchmarks/bench_controller.py
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

from gesscale.config import ControllerConfig
from gesscale.latency_map import latency_map_from_dict
from gesscale.model import Measurement, PerformanceModel
from gesscale.observation import Observation
from gesscale.policies.base import PolicyContext, place
from gesscale.policies.gesscale_paper import GesscalePolicy
from gesscale.scenario import load_scenario
from gesscale.simulate import run_once

ROOT = Path(__file__).resolve().parents[1]


def decision_ms(n_nodes: int = 1000, repeats: int = 41) -> tuple[float, float]:
    """Median ms of a scale-up and of a multi-replica scale-down decision among `n_nodes` candidates."""
    rnd = random.Random(7)
    nodes = {f"n{i:04d}": {"lat": rnd.uniform(35, 65), "lon": rnd.uniform(-10, 30)} for i in range(n_nodes)}
    t0 = time.perf_counter()
    lmap = latency_map_from_dict({"nodes": nodes, "derive": "geo"}, "synthetic-1000")
    graph = lmap.graph()
    print(f"built a {n_nodes}-node map and graph in {time.perf_counter() - t0:.1f} s (not part of a decision)")
    replicas = tuple(list(nodes)[:8])
    config = ControllerConfig(max_replicas=64)
    model = PerformanceModel().fit([Measurement(n, 10.0 * n, 60 * n**0.9 - 1.0 * n) for n in (1, 2, 4)])

    def one(bp: float, rate: float) -> float:
        policy = GesscalePolicy(model=PerformanceModel.from_dict(model.to_dict()))
        obs = Observation(time_s=0, period_s=60, input_rate=rate, throughput=rate, backlog=0, backlog_growth=1,
                          bp_upstream=bp, bp_operator=0, replicas=replicas, nd_max_ms=lmap.nd_max(replicas))
        ctx = PolicyContext(graph=graph, candidates=tuple(lmap.names), config=config, rng=random.Random(1))
        start = time.perf_counter()
        decision = place(policy.decide(obs, ctx), replicas, ctx, latency_aware=True)
        elapsed = (time.perf_counter() - start) * 1000
        assert decision.add or decision.remove
        return elapsed

    up = statistics.median(one(1.0, 400.0) for _ in range(repeats))
    down = statistics.median(one(0.0, 50.0) for _ in range(repeats))
    return up, down


def simulated_per_wall_s(policy: str = "gesscale", runs: int = 5) -> float:
    """Simulated seconds per wall-clock second on the taxi scenario (median of `runs`)."""
    sc = load_scenario(ROOT / "scenarios" / "pi10-taxi.yaml")
    speeds = []
    for seed in range(1, runs + 1):
        start = time.perf_counter()
        r = run_once(sc, policy, seed)
        speeds.append(r.completion_s / (time.perf_counter() - start))
    return statistics.median(speeds)


def optimal_wall_s() -> tuple[float, float, dict]:
    """Wall seconds of optimal's programme alone and of its whole run on pi10-taxi (seed 1), and its summary."""
    from gesscale.policies.optimal import OptimalPolicy
    from gesscale.sim_backend import SimBackend

    sc = load_scenario(ROOT / "scenarios" / "pi10-taxi.yaml")
    start = time.perf_counter()
    OptimalPolicy().prepare_offline(SimBackend(sc, seed=sc.seed))
    solve_s = time.perf_counter() - start
    start = time.perf_counter()
    r = run_once(sc, "optimal", sc.seed)
    return solve_s, time.perf_counter() - start, r.model or {}


def main() -> None:
    """Print both figures next to their targets."""
    up, down = decision_ms()
    print(f"decision with 1000 candidate nodes: scale-up {up:.2f} ms, scale-down (several replicas) {down:.2f} ms "
          f"(median; target <= 50 ms)")
    for policy in ("gesscale", "thr-nlunaware"):
        speed = simulated_per_wall_s(policy)
        print(f"simulator, {policy} on pi10-taxi: {speed:,.0f} simulated s per wall s (target >= 100,000; "
              f"ratio {speed / 100_000:.1f}x)")
    solve_s, run_s, summary = optimal_wall_s()
    print(f"optimal on pi10-taxi: programme {solve_s:.2f} s, whole run {run_s:.2f} s wall (target <= 10 s); "
          f"optimum in [{summary.get('optimal_cost_lower', 0):,.1f}, {summary.get('optimal_cost_upper', 0):,.1f}] "
          f"replica-min (gap {100 * summary.get('discretisation_gap', 0):.2f} %, backlog step "
          f"{summary.get('backlog_step', 0):.0f} records)")


if __name__ == "__main__":
    main()
