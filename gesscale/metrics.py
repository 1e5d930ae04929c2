"""Elasticity metrics of one run (Gesscale paper; SPEC RG, Herbst et al., "Ready for Rain?", TOMPECS 2018).

Inputs are per-time-step series of equal length over the input window [0, T): demand d (the ideal replica
count), supply s (replicas in use), plus the backlog and queueing delay over the whole run (input window and
drain), the step length dt, the completion time of the run and the number of reconfigurations.

- accuracy_U = Σ(d−s)⁺·Δt / T and accuracy_O = Σ(s−d)⁺·Δt / T, in replicas;
- timeshare_U / timeshare_O = % of T with d > s / s > d;
- excess_time = (completion − T) / T: how much longer than the ideal the run needs to process everything
  once the input stops (the ideal finishes with the input);
- instability = % of the steps in which supply and demand do not change in the same direction:
  Σ min(|sgn Δs − sgn Δd|, 1) / steps (SPEC's θ);
- jitter = (supply changes − demand changes) per hour (SPEC; negative: too few adaptations);
- cost = replica-minutes until completion; avg_replicas = mean supply over T;
- max_backlog (records) and p95_delay_s (queueing delay: remaining pause + backlog / capacity).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

METRIC_KEYS = (
    "accuracy_o",
    "accuracy_u",
    "timeshare_o",
    "timeshare_u",
    "excess_time",
    "reconfigurations",
    "cost",
    "instability",
    "jitter",
    "avg_replicas",
    "max_backlog",
    "p95_delay_s",
)
# Lower is better for every key except none; jitter is best near 0.
LOWER_IS_BETTER = {k: True for k in METRIC_KEYS}


@dataclass(frozen=True)
class RunMetrics:
    """The DESIGN §4 metric keys of one run (plus the mean delay, reported but not in the contract)."""

    accuracy_o: float
    accuracy_u: float
    timeshare_o: float
    timeshare_u: float
    excess_time: float
    reconfigurations: int
    cost: float
    instability: float
    jitter: float
    avg_replicas: float
    max_backlog: float
    p95_delay_s: float
    mean_delay_s: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """The contract keys only, as JSON numbers."""
        d = asdict(self)
        return {k: float(d[k]) if k != "reconfigurations" else int(d[k]) for k in METRIC_KEYS}


def _sign_changes(x: np.ndarray) -> np.ndarray:
    return np.sign(np.diff(x.astype(float)))


def compute_metrics(
    demand: Sequence[float],
    supply: Sequence[float],
    *,
    dt: float,
    completion_s: float,
    supply_until_completion: Sequence[float],
    backlog: Sequence[float],
    delay: Sequence[float],
    reconfigurations: int,
) -> RunMetrics:
    """All metrics of one run (see the module docstring for each definition).

    `demand` and `supply` cover the input window [0, T) with T = len(demand)·dt; `supply_until_completion`,
    `backlog` and `delay` cover the whole run up to its completion.
    """
    d = np.asarray(demand, dtype=float)
    s = np.asarray(supply, dtype=float)
    if d.shape != s.shape or d.size == 0:
        raise ValueError("demand and supply must be non-empty series of the same length")
    T = d.size * dt
    under = np.clip(d - s, 0, None)
    over = np.clip(s - d, 0, None)
    ds, ss = _sign_changes(d), _sign_changes(s)
    opposite = (ds != ss).sum()
    steps = max(1, d.size - 1)
    demand_changes = int((ds != 0).sum())
    supply_changes = int((ss != 0).sum())
    s_all = np.asarray(supply_until_completion, dtype=float)
    b = np.asarray(backlog, dtype=float)
    q = np.asarray(delay, dtype=float)
    return RunMetrics(
        accuracy_o=float(over.sum() * dt / T),
        accuracy_u=float(under.sum() * dt / T),
        timeshare_o=float(100.0 * (s > d).sum() / d.size),
        timeshare_u=float(100.0 * (d > s).sum() / d.size),
        excess_time=float(max(0.0, completion_s - T) / T),
        reconfigurations=int(reconfigurations),
        cost=float(s_all.sum() * dt / 60.0),
        instability=float(100.0 * opposite / steps),
        jitter=float((supply_changes - demand_changes) / (T / 3600.0)),
        avg_replicas=float(s.mean()),
        max_backlog=float(b.max()) if b.size else 0.0,
        p95_delay_s=float(np.percentile(q, 95)) if q.size else 0.0,
        mean_delay_s=float(q.mean()) if q.size else 0.0,
    )
