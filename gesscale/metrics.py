"""Elasticity metrics of one run (Gesscale paper; SPEC RG elasticity metrics, Herbst et al.).

Inputs are per-time-step series of equal length over the input window [0, T): demand d (the ideal replica
count), supply s (replicas in use), plus the backlog and queueing delay over the whole run (input window and
drain), the step length dt, the completion time of the run and the number of reconfigurations.

Which demand each metric is judged against. The SPEC RG metrics define demand as the fewest resources that meet
the service objective under the current load (Herbst et al., "Ready for Rain? A View from SPEC Research on the
Future of Cloud Metrics", SPEC RG tech. report 2016; published as "Quantifying Cloud Performance and
Dependability", ACM TOMPECS 2018). Two consequences here:
- A policy acts once per control period, so jitter and instability compare supply with the *actionable demand*:
  one value per control period, the most replicas any second of that period needs (what the oracle `ideal`
  provisions for it, `period_demand`), against the supply in force during the period. Counting the per-second
  flicker of the demand as adaptations nobody could follow made the oracle itself score about -38/h.
- Records waiting in a backlog are load too: the *effective demand* of a second is the fewest replicas whose
  capacity sustains the input plus draining the backlog within DRAIN_S = 300 s, the delay bound the regret
  reference `optimal` holds every record to (`replicas_needed` of input + backlog / DRAIN_S), capped at the
  most replicas there are. accuracy and timeshare are judged against
  it, so a policy that holds an 80,000-record backlog is under-provisioned, not matched. Without a backlog it
  equals the ideal replica count.

Definitions (T = input duration):
- accuracy_U = Σ(d_eff−s)⁺·Δt / T and accuracy_O = Σ(s−d_eff)⁺·Δt / T, in replicas;
- timeshare_U / timeshare_O = % of T with d_eff > s / s > d_eff;
- excess_time = (completion − T) / T: how much longer than the ideal the run needs to process everything
  once the input stops (the ideal finishes with the input);
- instability = % of the control periods in which actionable demand and supply do not change in the same
  direction: Σ min(|sgn ΔS_k − sgn ΔD_k|, 1) / periods (SPEC's θ);
- jitter = (supply changes − actionable-demand changes) per hour (SPEC's j; negative: too few adaptations);
- reconfigurations = scale-ups and scale-downs applied; moves = re-placements applied (a replica moved to a
  better node, added first then removed: docs/events.md), counted apart;
- cost = replica-minutes until completion; avg_replicas = mean supply over T;
- max_backlog (records) and p95_delay_s (queueing delay: remaining pause + backlog / capacity);
- late_share (reported beside the keys, not one of them): the share of the records processed more than DRAIN_S
  after they arrived, in first-in-first-out order, each second's records taken at the wait of its last one.
  `optimal` holds it at 0; a policy cheaper than `optimal` is cheaper because records wait longer.
Pure: no I/O.
"""

from __future__ import annotations

import math
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
    "moves",
    "cost",
    "instability",
    "jitter",
    "avg_replicas",
    "max_backlog",
    "p95_delay_s",
)
COUNT_KEYS = ("reconfigurations", "moves")  # whole numbers
DRAIN_S = 300.0  # the backlog of the effective demand is to be drained within this (s); `optimal`'s delay bound
# Lower is better for every key except none; jitter is best near 0.
LOWER_IS_BETTER = {k: True for k in METRIC_KEYS}


@dataclass(frozen=True)
class RunMetrics:
    """The metric keys of one run, docs/metrics.md (plus the mean delay and the late share, reported but not keys)."""

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
    late_share: float = 0.0
    moves: int = 0

    def to_dict(self) -> dict[str, float]:
        """The contract keys only, as JSON numbers."""
        d = asdict(self)
        return {k: int(d[k]) if k in COUNT_KEYS else float(d[k]) for k in METRIC_KEYS}



def _p95(delays: np.ndarray) -> float:
    """The 95th percentile of the per-second delays; inf when it falls among seconds without capacity (numpy's
    interpolation between two infinite values gives NaN and a RuntimeWarning)."""
    if not delays.size:
        return 0.0
    with np.errstate(invalid="ignore"):
        value = float(np.percentile(delays, 95))
    return math.inf if math.isnan(value) and np.isinf(delays).any() else value

def _sign_changes(x: np.ndarray) -> np.ndarray:
    return np.sign(np.diff(x.astype(float)))


def period_demand(demand: Sequence[float], period: int) -> np.ndarray:
    """The actionable demand: one value per control period of `period` steps, the most any step of it needs
    (what the oracle provisions for that period); a last partial period counts."""
    d = np.asarray(demand, dtype=float)
    p = max(1, int(period))
    return np.array([d[i:i + p].max() for i in range(0, d.size, p)])


def period_supply(supply: Sequence[float], period: int) -> np.ndarray:
    """The supply in force during each control period: its value at the period's first step (decisions take
    effect at period boundaries)."""
    return np.asarray(supply, dtype=float)[::max(1, int(period))]


def replicas_needed(load: Sequence[float], capacity: Sequence[float], n_min: int, n_max: int) -> np.ndarray:
    """For each load (records/s), the fewest replicas n in [n_min, n_max] with capacity[n] >= load.

    `capacity[n]` is the MST of the best placement of n replicas (index 0 unused); a load above every capacity
    needs n_max (no more replicas exist).
    """
    caps = np.maximum.accumulate(np.asarray(capacity, dtype=float)[1:])
    need = np.searchsorted(caps, np.asarray(load, dtype=float), side="left") + 1
    return np.clip(need, n_min, n_max).astype(int)


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
    moves: int = 0,
    period: int = 1,
    effective_demand: Sequence[float] | None = None,
    arrivals: Sequence[float] | None = None,
    departures: Sequence[float] | None = None,
) -> RunMetrics:
    """All metrics of one run (see the module docstring for each definition).

    `demand` and `supply` cover the input window [0, T) with T = len(demand)·dt; `supply_until_completion`,
    `backlog` and `delay` cover the whole run up to its completion. `period` is the control period in steps
    (jitter and instability are taken per period); `effective_demand` (same length as `demand`; default:
    `demand`) is the demand counting the backlog, against which accuracy and timeshare are judged. `arrivals` and
    `departures` (records in and processed per step, the whole run) give `late_share` (0 without them).
    """
    d = np.asarray(demand, dtype=float)
    s = np.asarray(supply, dtype=float)
    if d.shape != s.shape or d.size == 0:
        raise ValueError("demand and supply must be non-empty series of the same length")
    e = d if effective_demand is None else np.asarray(effective_demand, dtype=float)
    if e.shape != d.shape:
        raise ValueError("effective_demand must have the length of demand")
    T = d.size * dt
    under = np.clip(e - s, 0, None)
    over = np.clip(s - e, 0, None)
    dp, sp = period_demand(d, period), period_supply(s, period)
    ds, ss = _sign_changes(dp), _sign_changes(sp)
    opposite = (ds != ss).sum()
    steps = max(1, dp.size - 1)
    demand_changes = int((ds != 0).sum())
    supply_changes = int((ss != 0).sum())
    s_all = np.asarray(supply_until_completion, dtype=float)
    b = np.asarray(backlog, dtype=float)
    q = np.asarray(delay, dtype=float)
    return RunMetrics(
        accuracy_o=float(over.sum() * dt / T),
        accuracy_u=float(under.sum() * dt / T),
        timeshare_o=float(100.0 * (s > e).sum() / d.size),
        timeshare_u=float(100.0 * (e > s).sum() / d.size),
        excess_time=float(max(0.0, completion_s - T) / T),
        reconfigurations=int(reconfigurations),
        moves=int(moves),
        cost=float(s_all.sum() * dt / 60.0),
        instability=float(100.0 * opposite / steps),
        jitter=float((supply_changes - demand_changes) / (T / 3600.0)),
        avg_replicas=float(s.mean()),
        max_backlog=float(b.max()) if b.size else 0.0,
        p95_delay_s=_p95(q),
        mean_delay_s=float(q.mean()) if q.size else 0.0,
        late_share=late_share(arrivals, departures, DRAIN_S / dt) if arrivals is not None and departures is not None
        else 0.0,
    )


def late_share(arrivals: Sequence[float], departures: Sequence[float], bound_steps: float) -> float:
    """The share of the records that leave more than `bound_steps` steps after they arrive (first in, first out).

    `arrivals[i]` and `departures[i]` (same length) are the records in and processed during step i. A step's
    records are taken at the wait of the last of them (an upper bound to within one step, and half a record);
    records never processed are late.
    """
    a, d = np.asarray(arrivals, dtype=float), np.asarray(departures, dtype=float)
    if a.shape != d.shape:
        raise ValueError("arrivals and departures must be series of the same length")
    total = a.sum()
    if a.size == 0 or total <= 0:
        return 0.0
    cin, cout = np.cumsum(a), np.cumsum(d)
    leave = np.searchsorted(cout, cin - 0.5)  # the step in which the last record of each step is processed
    late = (leave >= a.size) | (leave - np.arange(a.size) > bound_steps)
    return float(a[late].sum() / total)
