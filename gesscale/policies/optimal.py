"""`optimal`: the offline reference that pays the same pauses as every other policy (issue 19).

`ideal` reconfigures instantly and for free, so "x % above ideal" mixes what a policy wastes with what no policy
can avoid. `optimal` knows the whole run in advance — the input of every second, the ground-truth MST of every
size with this seed's capacity noise, the restart pause — and follows the cheapest replica schedule that pays a
full pause on every change, finishes within `max_excess` of the input's end and processes every record within
`max_delay_s` seconds of its arrival. The schedule is computed exactly, up to a stated backlog discretisation,
by `gesscale.optimal_dp.solve` (dynamic programming over periods, replica count and backlog); its bracket on
the optimum is in `model_summary()`.

Placement: the min-ND_max sets of `gesscale.placement` (each size the greedy prefix of the map in force at the
start, which is also where every run starts), named explicitly so that the sets stay nested. When the map has a
`changes:` schedule the capacities follow the map in force each second, but the sets are not re-chosen after a
change (a stated limitation; the seven public scenarios have no changes).

If the bounds cannot be met (a peak beyond n_max, a delay bound shorter than a pause allows), the delay bound is
doubled up to the input's length, then the excess bound widened to the drain limit (1.0); the bounds used are
reported. Simulator only: on a live backend it holds its replica count.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from gesscale import placement
from gesscale.observation import Decision, Observation
from gesscale.optimal_dp import OfflinePlan, OfflineProblem, coarsened, solve
from gesscale.policies.base import Policy, PolicyContext, register


def problem_for(backend: Any, max_delay_s: float, max_excess: float, bins: int) -> tuple[OfflineProblem, list[str]]:
    """The offline problem of a `SimBackend`'s run (its input, noise, map and ground truth) and the node order."""
    sc = backend.scenario
    lmap = sc.latency_map
    names = list(lmap.names)
    n_max = max(1, min(sc.max_replicas, len(names)))
    # placed, and its latency taken, as the truth takes it (ND_max, or the farthest RTT to the site)
    order = placement.grow(backend.truth_view(lmap.at(0)), [], names, n_max)
    T = len(backend.rate)
    pause = int(round(sc.truth.reconfig_pause_s))
    delay = int(min(T, max(1, math.ceil(max_delay_s))))
    n_start = min(n_max, sc.truth.initial_replicas)
    floor = min(sc.min_replicas, n_max)  # every decision respects it; only the start may lie below
    n_min = min(floor, n_start)
    L = backend.period
    # Capacity for the widest horizon `solve_relaxed` may reach: every bound relaxed to its limit, decided on the
    # coarsest grid `coarsened` may choose (a period up to the deadline: a horizon up to twice it).
    widest = OfflineProblem(np.asarray(backend.rate, dtype=float), np.zeros((n_max + 1, 0)), L, pause, n_min,
                            n_max, n_start, T, 1.0, bins, floor)
    draft = replace(widest, max_delay_s=delay, max_excess=max_excess)
    H = 2 * (widest.deadline_s + L)
    noise = np.ones(H)
    have = min(H, len(backend.mst_noise))
    noise[:have] = backend.mst_noise[:have]
    starts = sorted({0, *(int(math.ceil(t)) for t in lmap.change_times if 0 < math.ceil(t) < H)})
    capacity = np.zeros((n_max + 1, H))
    for s, e in zip(starts, [*starts[1:], H], strict=True):
        graph = backend.truth_view(lmap.at(s))
        for n in range(1, n_max + 1):
            mst = sc.truth.mst(n, placement.nd_max(graph, order[:n]))
            capacity[n, s:e] = mst * noise[s:e]  # the simulator's own product, second by second
    problem = OfflineProblem(draft.input, capacity, L, pause, n_min, n_max, n_start, delay, max_excess, bins, floor)
    return problem, order


def solve_relaxed(problem: OfflineProblem) -> tuple[OfflinePlan, OfflineProblem]:
    """Solve; when infeasible, double the delay bound up to the input length, then allow excess up to 1.0. Each
    problem is solved on the control periods, or every few of them when its programme would not fit in memory
    (`gesscale.optimal_dp.coarsened`)."""
    T = problem.duration_s
    while True:
        plan = solve(problem := coarsened(problem))
        if plan.feasible:
            return plan, problem
        if problem.max_delay_s < T:
            problem = _with(problem, max_delay_s=min(T, 2 * problem.max_delay_s))
        elif problem.max_excess < 1.0:
            problem = _with(problem, max_excess=1.0)
        else:
            return plan, problem


def _with(problem: OfflineProblem, **changes: Any) -> OfflineProblem:
    return replace(problem, **changes)


@register
class OptimalPolicy(Policy):
    """Follows the schedule that `gesscale.optimal_dp` found for this very run (see the module docstring)."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "max_delay_s": "Every record is processed within this long of its arrival (s).",
        "max_excess": "The run finishes within this fraction of the input's length after its end.",
        "bins": "Backlog discretisation of the dynamic programme (more: exact, slower).",
    }

    option_bounds: ClassVar[dict[str, tuple]] = {
        "max_delay_s": (1.0, 30 * 86400.0, False),
        "max_excess": (0.0, 10.0, False),
        "bins": (2, 100_000, False),  # memory grows with it: `gesscale.optimal_dp.coarsened` keeps it in bounds
    }

    id = "optimal"
    summary = "offline reference: cheapest schedule paying every pause (excess <= 0, delay <= 300 s; DP)"
    latency_aware = True

    def __init__(self, max_delay_s: float = 300.0, max_excess: float = 0.0, bins: int = 4000) -> None:
        self.max_delay_s = max_delay_s
        self.max_excess = max_excess
        self.bins = bins
        self.control_period_s = 0
        self.asked: tuple[int, float] = (0, 0.0)
        self.plan: OfflinePlan | None = None
        self.problem: OfflineProblem | None = None
        self.order: list[str] = []

    def prepare_offline(self, backend: Any) -> None:
        """Read the whole run from the simulator and solve it (called by `gesscale.simulate.run_once`).

        When no schedule within `max_replicas` drains the backlog even with every bound relaxed, the plan holds
        `max_replicas` throughout (the most the scenario allows) and the summary says it is infeasible."""
        problem, self.order = problem_for(backend, self.max_delay_s, self.max_excess, self.bins)
        self.control_period_s = backend.period
        self.asked = (problem.max_delay_s, problem.max_excess)
        plan, self.problem = solve_relaxed(problem)
        if not plan.feasible:
            plan = replace(plan, targets=(problem.n_start, *[problem.n_max] * (len(plan.targets) - 1)))
        self.plan = plan

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """The planned count of the next period, on the nested min-ND_max sets."""
        if self.plan is None or self.problem is None:
            return Decision(obs.n, "no offline plan (simulator only)")
        # The programme may decide every few control periods (`decision_stride`): hold in between.
        k = int(math.floor(obs.time_s / self.problem.period_s + 1e-6))
        target = self.plan.targets[min(k, len(self.plan.targets) - 1)]
        chosen = self.order[:target]
        if target > obs.n:
            add = tuple(v for v in chosen if v not in obs.replicas)
            return Decision(target, "offline plan", add=add)
        if target < obs.n:
            remove = tuple(v for v in obs.replicas if v not in chosen)
            return Decision(target, "offline plan", remove=remove)
        return Decision(target, "offline plan")

    def model_summary(self) -> dict[str, Any] | None:
        """The bracket on the optimum and the bounds actually used."""
        if self.plan is None or self.problem is None:
            return None
        def finite(x: float) -> float | None:  # an infeasible plan has no cost: null in JSON, not Infinity
            return float(x) if math.isfinite(x) else None

        return {
            "optimal_cost_lower": finite(self.plan.cost_lower),
            "optimal_cost_upper": finite(self.plan.cost_upper),
            "plan_cost": finite(self.plan.cost_plan),
            "discretisation_gap": finite(self.plan.gap),
            "backlog_step": float(self.plan.backlog_step),
            "max_delay_s": self.problem.max_delay_s,
            "max_excess": self.problem.max_excess,
            "feasible": self.plan.feasible,
            "bounds_relaxed": (self.problem.max_delay_s, self.problem.max_excess) != self.asked,
            "requested_max_delay_s": self.asked[0],
            "requested_max_excess": self.asked[1],
            "n_max": self.problem.n_max,
            "decision_period_s": self.problem.period_s,
            "control_period_s": self.control_period_s,
        }


def summary_warnings(summary: dict[str, Any] | None) -> list[str]:
    """What a run of `optimal` could not do as asked (its `model_summary()`), as warnings for the CLI: bounds it
    had to relax (a peak beyond `max_replicas`), no feasible schedule at all, or decisions on a coarser grid."""
    if not summary:
        return []
    out = []
    n_max = summary.get("n_max")
    if not summary.get("feasible", True):
        out.append(f"optimal: no schedule within max_replicas {n_max} drains the backlog even with every bound "
                   f"relaxed (the load exceeds what {n_max} replicas carry); it holds {n_max} replicas, and its "
                   "row and the c/opt column compare against that, not against an optimum")
    elif summary.get("bounds_relaxed"):
        out.append(f"optimal: with max_replicas {n_max} no schedule meets every record within "
                   f"{summary['requested_max_delay_s']:g} s and excess <= {summary['requested_max_excess']:g}; "
                   f"it meets every record within {summary['max_delay_s']:g} s and excess <= "
                   f"{summary['max_excess']:g} instead (its row and c/opt are against these bounds)")
    decision, period = summary.get("decision_period_s"), summary.get("control_period_s")
    if decision and period and decision != period:
        out.append(f"optimal: decides every {decision:g} s rather than every control period ({period:g} s), so that "
                   "its programme fits in memory; its cost is the optimum over schedules changing at most that often")
    return out
