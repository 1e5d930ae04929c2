"""End-to-end latency of records: percentiles per control period and per run, live and simulated alike.

A record's latency is the time from its arrival (its append to the input topic) to its processing (the append of
its output, or for an aggregating query the commit of the micro-batch that consumed it; docs/metrics.md, "Record
latency"). The same summary is taken of both sides:

- **live** (`gesscale.testbed.latency` reads the broker's append timestamps): one latency per record;
- **simulated** (`fifo_waits`): the fluid simulator knows only how many records arrive and are processed per
  step, so records leave first in, first out and each step's records are taken at the wait of the last of them,
  the same per-record model as `gesscale.metrics.late_share` (an upper bound to within one step).

Percentiles are nearest-rank: the p-th percentile is the smallest latency with at least p % of the records at
or below it (with weights: of the total weight), so every figure is a latency some record really had. A record
never processed has an infinite latency: it counts above every bound, and a percentile or maximum that falls on
it is `None` (JSON null). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gesscale.metrics import DRAIN_S

PERCENTILES = (50, 95, 99)
# The figures of one group of records (a control period, or a run): how many, p50/p95/p99 and the largest (s).
SUMMARY_KEYS = ("records", "p50_s", "p95_s", "p99_s", "max_s")
# A run adds the share of its records above the simulator's delay bound and above the run-level SLO.
RUN_KEYS = (*SUMMARY_KEYS, "over_bound_share", "over_slo_share")
BOUND_S = DRAIN_S  # the simulator's delay bound: `optimal` holds every record within it (gesscale.metrics)
# The run-level SLO of the compressed day (the demo's 150 s day, 576 trace seconds per wall second): a record is
# to be processed within one control period (10 s, the demo's) of its arrival. Below it a record waits for a few
# micro-batches at most; above it it sat through a whole period in a backlog the controller had already seen.
# The simulator's 300 s bound, twice the whole compressed day, cannot tell one demo run from another.
SLO_S = 10.0


def percentile(values: Sequence[float], q: float, weights: Sequence[float] | None = None) -> float:
    """Nearest-rank `q`-th percentile (0 < q <= 100) of `values`, each counted `weights[i]` times (default 1).

    The smallest value v such that the weight of the values <= v is at least q % of the total. NaN when the
    total weight is 0.
    """
    v = np.asarray(values, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    if v.shape != w.shape:
        raise ValueError("values and weights must have the same length")
    keep = w > 0
    v, w = v[keep], w[keep]
    total = w.sum()
    if v.size == 0 or total <= 0:
        return math.nan
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    i = int(np.searchsorted(cum, q / 100.0 * total - 1e-9 * total, side="left"))
    return float(v[order][min(i, v.size - 1)])


def _finite_or_none(x: float, ndigits: int = 3) -> float | None:
    return round(float(x), ndigits) if math.isfinite(x) else None


def summarize(latencies_s: Sequence[float], weights: Sequence[float] | None = None) -> dict[str, Any]:
    """`SUMMARY_KEYS` of one group of records: the count (Σ weights) and p50, p95, p99, max in seconds (None for
    an empty group, or where an infinite latency, a record never processed, falls)."""
    v = np.asarray(latencies_s, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    count = float(w.sum()) if v.size else 0.0
    out: dict[str, Any] = {"records": int(round(count))}
    for q in PERCENTILES:
        out[f"p{q}_s"] = _finite_or_none(percentile(v, q, w)) if count > 0 else None
    out["max_s"] = _finite_or_none(float(v[w > 0].max())) if count > 0 else None
    return out


def share_above(latencies_s: Sequence[float], bound_s: float, weights: Sequence[float] | None = None) -> float:
    """The share (0..1) of the records whose latency is above `bound_s` (strictly); 0 for no records."""
    v = np.asarray(latencies_s, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    total = w.sum()
    return float(w[v > bound_s].sum() / total) if v.size and total > 0 else 0.0


def run_summary(latencies_s: Sequence[float], weights: Sequence[float] | None = None, *,
                bound_s: float = BOUND_S, slo_s: float = SLO_S) -> dict[str, Any]:
    """`RUN_KEYS` of a whole run, with the bound and the SLO they were judged against."""
    return {**summarize(latencies_s, weights),
            "over_bound_share": round(share_above(latencies_s, bound_s, weights), 6),
            "over_slo_share": round(share_above(latencies_s, slo_s, weights), 6),
            "bound_s": float(bound_s), "slo_s": float(slo_s)}


def by_period(arrivals_s: Sequence[float], latencies_s: Sequence[float], period_ends_s: Sequence[float],
              weights: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """`summarize` of the records of each control period, a record counting in the period of its arrival.

    Period k holds the arrivals in (end[k-1], end[k]] (the first period everything up to end[0]); an arrival
    after the last end counts in the last period. `period_ends_s` is ascending, on the clock of `arrivals_s`.
    """
    a = np.asarray(arrivals_s, dtype=float)
    v = np.asarray(latencies_s, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    if not (a.shape == v.shape == w.shape):
        raise ValueError("arrivals, latencies and weights must have the same length")
    ends = np.asarray(period_ends_s, dtype=float)
    if ends.size == 0:
        return []
    if np.any(np.diff(ends) < 0):
        raise ValueError("period ends must be ascending")
    k = np.minimum(np.searchsorted(ends, a, side="left"), ends.size - 1)
    return [summarize(v[k == i], w[k == i]) for i in range(ends.size)]


def fifo_waits(arrivals: Sequence[float], departures: Sequence[float]) -> np.ndarray:
    """Per step i, the wait in steps of the records that arrived in step i, first in first out: the step in
    which the last of them is processed minus i (0: processed within its step of arrival); inf when not all of
    them are processed by the end. `arrivals[i]` and `departures[i]` are the records in and processed in step i.

    The same model as `gesscale.metrics.late_share`: `share_above(fifo_waits(a, d), B, a)` is `late_share(a,
    d, B)`.
    """
    a, d = np.asarray(arrivals, dtype=float), np.asarray(departures, dtype=float)
    if a.shape != d.shape:
        raise ValueError("arrivals and departures must be series of the same length")
    cin, cout = np.cumsum(a), np.cumsum(d)
    leave = np.searchsorted(cout, cin - 0.5)  # the step in which the last record of each step is processed
    waits = (leave - np.arange(a.size)).astype(float)
    waits[leave >= a.size] = math.inf
    return waits


def simulated(arrivals: Sequence[float], departures: Sequence[float], dt: float, period_steps: int | None = None,
              *, bound_s: float = BOUND_S, slo_s: float = SLO_S) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The latency of a simulated run, per run (`RUN_KEYS`) and per control period of `period_steps` steps (by
    step of arrival; none when `period_steps` is None), from its per-step arrivals and departures
    (`fifo_waits`, steps of `dt` seconds)."""
    a = np.asarray(arrivals, dtype=float)
    waits = fifo_waits(a, departures) * dt
    run = run_summary(waits, a, bound_s=bound_s, slo_s=slo_s)
    if period_steps is None:
        return run, []
    p = max(1, int(period_steps))
    starts = np.arange(a.size) * dt
    ends = [min(i + p, a.size) * dt - dt for i in range(0, a.size, p)]
    return run, by_period(starts, waits, ends, a)


# The per-period columns a time series CSV gains (`period_columns`): `latency_records`, `latency_p50_s`, ...
PERIOD_COLUMNS = tuple(f"latency_{k}" for k in SUMMARY_KEYS)


def period_columns(summary: dict[str, Any] | None) -> dict[str, Any]:
    """A period's `summarize` as `PERIOD_COLUMNS` (empty cells for a period without figures)."""
    s = summary or {}
    return {f"latency_{k}": "" if s.get(k) is None else s[k] for k in SUMMARY_KEYS}
