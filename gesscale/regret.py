"""Regret: each policy's cost and excess time against the references of the same runs (pure, no I/O).

`optimal` pays the same pauses as every policy (the achievable bound under its stated delay and excess bounds);
`ideal` reconfigures for free (what no real policy can reach). Ratios and differences are taken seed by seed —
the references saw the same input and noise — and the median over seeds is reported.

Beside them, the share of records a policy held longer than `optimal`'s delay bound (`late`, a median over the
seeds; `gesscale.metrics.late_share`): `optimal` holds it at 0, so a policy may be cheaper than the bound only by
letting records wait longer.

A run whose backlog was never drained (it reached the simulator's drain limit) has a low cost only because it
stopped processing: such a policy is *failing*, and tables mark it instead of ranking its cost.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

REFERENCES = ("optimal", "ideal")
REGRET_KEYS = ("cost_vs_optimal", "cost_vs_ideal", "excess_vs_optimal", "excess_vs_ideal")


@dataclass(frozen=True)
class Outcome:
    """What regret needs of one run."""

    seed: int
    cost: float
    excess: float
    drained: bool = True
    late: float = 0.0  # share of the records held longer than optimal's delay bound


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def regret(runs: Mapping[str, Sequence[Outcome]]) -> dict[str, dict[str, float | int | None]]:
    """policy → median cost/reference and excess − reference over the seeds the reference also ran, the median
    late share over all its seeds (`late`), and the number of seeds that failed to drain (`failed_seeds`) out of
    `seeds`. A missing reference gives None."""
    refs = {r: {o.seed: o for o in runs.get(r, ())} for r in REFERENCES}
    out: dict[str, dict[str, float | int | None]] = {}
    for pid, outcomes in runs.items():
        row: dict[str, float | int | None] = {}
        for r in REFERENCES:
            pairs = [(o, refs[r][o.seed]) for o in outcomes if o.seed in refs[r]]
            ratios = [o.cost / ref.cost for o, ref in pairs if ref.cost > 0]
            row[f"cost_vs_{r}"] = _median(ratios)
            row[f"excess_vs_{r}"] = _median([o.excess - ref.excess for o, ref in pairs])
        row["late"] = _median([o.late for o in outcomes])
        row["failed_seeds"] = sum(1 for o in outcomes if not o.drained)
        row["seeds"] = len(outcomes)
        out[pid] = row
    return out


def failing(row: Mapping[str, float | int | None]) -> bool:
    """True when some seed of the policy left a backlog it never drained."""
    return bool(row.get("failed_seeds"))


def fmt_ratio(value: float | int | None) -> str:
    """A cost ratio for a table cell ('–' when the reference did not run)."""
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def fmt_diff(value: float | int | None) -> str:
    """An excess-time difference for a table cell."""
    return "–" if value is None else f"{value:+.4f}"


def fmt_share(value: float | int | None) -> str:
    """A share of the records, as a percentage for a table cell."""
    return "–" if value is None else f"{100 * value:.1f} %"


def status(row: Mapping[str, float | int | None]) -> str:
    """'ok', or 'FAIL k/N' when k of the N seeds never drained their backlog."""
    return f"FAIL {row['failed_seeds']}/{row['seeds']}" if failing(row) else "ok"


def _p95(values: Sequence[float]) -> float:
    """95th percentile, linear between order statistics (numpy's default)."""
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=20, method="inclusive")[-1])


def distribution(by_scenario: Mapping[str, Mapping[str, Mapping[str, float | int | None]]]
                 ) -> dict[str, dict[str, float | int | None]]:
    """policy → median and 95th percentile, over the scenarios, of each scenario's cost / optimal, excess −
    optimal's and late share (themselves medians over seeds), the number of scenarios and of failing ones.

    This is what a set of generated scenarios is judged by (issue 19): one row per policy instead of a column per
    scenario. Failing scenarios stay in (their excess is what failing costs) and are counted.
    """
    policies = sorted({p for per in by_scenario.values() for p in per})
    out: dict[str, dict[str, float | int | None]] = {}
    for pid in policies:
        rows = [per[pid] for per in by_scenario.values() if pid in per]
        row: dict[str, float | int | None] = {"scenarios": len(rows), "failing": sum(1 for r in rows if failing(r))}
        for key in ("cost_vs_optimal", "excess_vs_optimal", "late"):
            values = [float(v) for r in rows if (v := r.get(key)) is not None]
            row[f"{key}_median"] = _median(values)
            row[f"{key}_p95"] = _p95(values) if values else None
        out[pid] = row
    return out
