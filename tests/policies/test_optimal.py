"""`optimal`: the dynamic programme against brute force (every decision sequence of tiny problems), and the
policy in the simulator (its simulated run is the run the programme planned)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from gesscale.optimal_dp import OfflineProblem, solve
from gesscale.scenario import scenario_from_dict
from gesscale.simulate import run_once

ROOT = Path(__file__).resolve().parents[2]


def _run(pr: OfflineProblem, targets: tuple[int, ...]) -> tuple[float, bool]:
    """Brute-force referee, written from the simulator's rules: (cost in replica-minutes, bounds met).

    Runs until the backlog is gone (the last count held), then applies the metrics' definitions: completion =
    last second with ≥ 1 record waiting + 1 (never before T); every record done within max_delay_s (cumulative
    processed ≥ cumulative input of max_delay_s seconds earlier, to one record).
    """
    T, L = len(pr.input), pr.period_s
    plan = list(targets) + [targets[-1]] * 50
    arrived = processed = 0.0
    backlog, pause, prev = 0.0, 0, plan[0]
    supply, waiting, ok = [], [], True
    cum_in = [0.0]
    for i in range(len(plan) * L):
        n = plan[i // L]
        if i % L == 0 and n != prev:
            pause = pr.pause_s
        prev = n if i % L == 0 else prev
        inp = float(pr.input[i]) if i < T else 0.0
        arrived += inp
        cum_in.append(arrived)
        if pause > 0:
            pause -= 1
            done = 0.0
        else:
            done = min(backlog + inp, float(pr.capacity[n, i]))
        backlog = backlog + inp - done
        processed += done
        supply.append(n)
        waiting.append(backlog)
        due = cum_in[max(0, i + 1 - pr.max_delay_s)]
        ok = ok and processed >= due - 1.0 - 1e-9
        if i >= T and backlog < 1.0 and i >= (len(targets)) * L:
            break
    busy = [i for i, b in enumerate(waiting) if b >= 1.0]
    completion = max(T, busy[-1] + 1 if busy else T)
    ok = ok and (completion - T) / T <= pr.max_excess + 1e-12
    return sum(supply[:completion]) / 60.0, ok


def _brute_force(pr: OfflineProblem) -> float:
    best = float("inf")
    counts = range(pr.n_min, pr.n_max + 1)
    for rest in itertools.product(counts, repeat=pr.periods - 1):
        cost, ok = _run(pr, (pr.n_start, *rest))
        if ok:
            best = min(best, cost)
    return best


def _tiny(seed: int, *, pause: int, delay: int, excess: float, bins: int = 0) -> OfflineProblem:
    rng = np.random.default_rng(seed)
    T, L, n_max = 12, 3, 3
    inp = rng.integers(0, 14, T).astype(float)
    per_replica = rng.integers(3, 6)
    H = 64
    capacity = np.array([[0.0] * H] + [[float(per_replica * n - (n - 1))] * H for n in range(1, n_max + 1)])
    draft = OfflineProblem(inp, capacity, L, pause, 1, n_max, 1, delay, excess, 2)
    if not bins:  # a grid step of exactly one record: integer data stays on the grid, both bounds are exact
        largest = max(inp[max(0, i + 1 - delay): i + 1].sum() for i in range(draft.periods * L)) + 1.0
        bins = int(largest) + 1
    return OfflineProblem(inp, capacity, L, pause, 1, n_max, 1, delay, excess, bins)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("pause", "delay", "excess"), [(2, 5, 0.0), (2, 4, 0.5), (4, 7, 0.0), (1, 3, 0.25)])
def test_the_programme_finds_the_brute_force_optimum(seed: int, pause: int, delay: int, excess: float) -> None:
    pr = _tiny(seed, pause=pause, delay=delay, excess=excess)
    best = _brute_force(pr)
    plan = solve(pr)
    if best == float("inf"):
        assert not plan.feasible
        return
    assert plan.feasible
    assert plan.cost_lower == pytest.approx(best) and plan.cost_upper == pytest.approx(best)
    cost, ok = _run(pr, plan.targets)
    assert ok and cost == pytest.approx(best) and plan.cost_plan == pytest.approx(best)


@pytest.mark.parametrize("seed", range(6))
def test_a_coarse_grid_brackets_the_optimum_and_its_plan_is_feasible(seed: int) -> None:
    pr = _tiny(seed, pause=2, delay=6, excess=0.0, bins=7)
    best = _brute_force(pr)
    plan = solve(pr)
    if not plan.feasible:  # rounding up may lose every plan; the relaxation still bounds from below
        assert plan.cost_lower <= best
        return
    cost, ok = _run(pr, plan.targets)
    assert ok
    assert plan.cost_lower - 1e-9 <= best <= cost + 1e-9 <= plan.cost_upper + 2e-9
    assert cost == pytest.approx(plan.cost_plan)


def test_a_load_beyond_every_count_is_infeasible() -> None:
    inp = np.full(12, 50.0)
    capacity = np.vstack([np.zeros(64), np.full((2, 64), 10.0)])
    plan = solve(OfflineProblem(inp, capacity, 3, 1, 1, 2, 1, 4, 0.0, 50))
    assert not plan.feasible


def _scenario(workload: dict, pause: float = 120.0) -> dict:
    return {
        "name": "mini", "control_period_s": 60,
        "cluster": {"latency_map": str(ROOT / "inventory" / "latency" / "pi10.yaml"), "min_replicas": 1,
                    "max_replicas": 8},
        "operator": {"alpha": 60.0, "beta": 0.9, "gamma": 0.1, "noise": 0.03, "reconfig_pause_s": pause,
                     "initial_replicas": 2},
        "workload": workload, "seed": 3,
    }


@pytest.mark.parametrize("pause", [120.0, 150.0])
def test_in_the_simulator_optimal_runs_its_plan_and_meets_the_bounds(pause: float) -> None:
    sc = scenario_from_dict(_scenario({"kind": "steps", "levels": [60, 300, 120, 250], "step_s": 900}, pause))
    r = run_once(sc, "optimal", sc.seed)
    summary = r.model
    assert summary is not None and summary["feasible"]
    assert r.metrics.excess_time == 0.0
    assert r.metrics.reconfigurations >= 2  # the steps need both up and down
    # The simulator's own accounting of the run equals the programme's exact replay of the plan.
    assert r.metrics.cost == pytest.approx(summary["plan_cost"], abs=1e-6)
    assert summary["optimal_cost_lower"] <= r.metrics.cost <= summary["optimal_cost_upper"] + 1e-9
    ideal = run_once(sc, "ideal", sc.seed)
    gesscale = run_once(sc, "gesscale", sc.seed)
    assert r.metrics.cost < gesscale.metrics.cost
    assert ideal.metrics.cost > 0


def test_a_start_below_the_floor_is_left_at_the_first_decision() -> None:
    pr = _tiny(0, pause=2, delay=6, excess=0.0)
    floored = OfflineProblem(pr.input, pr.capacity, pr.period_s, pr.pause_s, 1, 3, 1, pr.max_delay_s, 0.0, pr.bins,
                             n_floor=2)
    plan = solve(floored)
    best = float("inf")
    for rest in itertools.product((2, 3), repeat=floored.periods - 1):
        cost, ok = _run(floored, (1, *rest))
        best = min(best, cost) if ok else best
    assert best < float("inf") and plan.feasible and min(plan.targets[1:]) >= 2
    assert plan.cost_plan == pytest.approx(best)
