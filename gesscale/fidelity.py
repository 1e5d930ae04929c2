"""How well a simulated twin predicted its live run: the same four figures of both, and the errors
(docs/experiments.md, "The simulated twin of a live run").

Live, from the periods the loop observed (`gesscale.twin` reads the same periods to build the twin):
- reconfigurations: the changes carried out;
- replica-minutes until completion: each period's replicas times the time since the observation before it,
  from the start of the first period until completion (the simulator's `cost`);
- excess: (completion - end of the input) / length of the input, where the input ends when the input topic's
  end offset stops growing and the run completes at the first observation after it with no backlog (an upper
  bound by up to a period: the live backlog is known at observations only; the simulator's `excess_time`);
- p95 latency: the day records' end-to-end latency (`gesscale.testbed.latency`); the twin's is the simulator's
  FIFO model of the same (`gesscale.latency.simulated`).

The goals (issue 30): the twin's reconfigurations within ±1 of the live count (±30 % above 4) and its
replica-minutes within 15 %; excess and p95 latency are reported without a goal. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gesscale.twin import input_per_second

# (key, label): the figures compared, in the table's order.
FIGURES = (("reconfigurations", "reconfigurations"), ("replica_minutes", "replica-minutes"),
           ("excess", "excess"), ("p95_latency_s", "p95 latency s"))
REPLICA_MINUTES_GOAL = 0.15
RECONFIG_GOAL = 1
RECONFIG_GOAL_REL = 0.30  # above RECONFIG_GOAL_ABOVE changes
RECONFIG_GOAL_ABOVE = 4


def resources(periods: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """What a live run's replicas cost, from the periods the loop observed (module docstring): replica-minutes
    from the start of the first period until completion, each period's replicas times the time since the
    observation before it, so that the time a reconfiguration blocked the loop is paid by the replicas that
    served through it; the time-weighted mean replicas over the same span; the span and the excess.

    Summing replicas x the configured period over the observed periods instead leaves out every reconfiguration
    (40-60 s each on the testbed) and favours the policies that reconfigure most. None where the periods cannot
    tell (no periods, no input, replicas not recorded)."""
    out: dict[str, float | None] = {"replica_minutes": None, "avg_replicas": None, "span_s": None, "excess": None}
    t0, rates = input_per_second(periods)
    if not periods or not rates:
        return out
    input_end = t0 + len(rates)
    done = next((i for i, p in enumerate(periods)
                 if float(p["time_s"]) >= input_end - 1.0 and float(p.get("backlog") or 0.0) < 1.0), len(periods) - 1)
    completion = float(periods[done]["time_s"])
    out["excess"] = max(0.0, completion - input_end) / len(rates)
    if all(isinstance(p.get("replicas"), list | tuple) for p in periods[: done + 1]):
        times = [t0] + [float(p["time_s"]) for p in periods[: done + 1]]
        replica_s = sum(len(p["replicas"]) * (b - a) for p, a, b in zip(periods, times, times[1:], strict=False))
        span = completion - t0
        out["replica_minutes"] = replica_s / 60.0
        out["span_s"] = span
        out["avg_replicas"] = replica_s / span if span > 0 else None
    return out


def observed(periods: Sequence[Mapping[str, Any]], reconfigurations: int,
             latency: Mapping[str, Any] | None) -> dict[str, float | int | None]:
    """The live run's figures (module docstring); None where the periods cannot tell (no replicas recorded)."""
    cost = resources(periods)
    return {"reconfigurations": reconfigurations, "replica_minutes": cost["replica_minutes"],
            "excess": cost["excess"], "p95_latency_s": (latency or {}).get("p95_s")}


def predicted(medians: Mapping[str, Any], latency: Mapping[str, Any] | None) -> dict[str, float | int | None]:
    """The twin's figures: the simulator's medians of one policy (`gesscale.report.summary`) and its simulated
    latency (`gesscale.report.simulated_latency`'s `by_policy` entry)."""
    return {"reconfigurations": medians.get("reconfigurations"), "replica_minutes": medians.get("cost"),
            "excess": medians.get("excess_time"), "p95_latency_s": (latency or {}).get("p95_s")}


def _goal(key: str, live: float) -> tuple[str, float | None]:
    """(how the goal reads, the largest absolute error it allows) of one figure at its live value."""
    if key == "reconfigurations":
        if live > RECONFIG_GOAL_ABOVE:
            return f"±{RECONFIG_GOAL_REL:.0%}", RECONFIG_GOAL_REL * live
        return f"±{RECONFIG_GOAL}", float(RECONFIG_GOAL)
    if key == "replica_minutes":
        return f"±{REPLICA_MINUTES_GOAL:.0%}", REPLICA_MINUTES_GOAL * live
    return "–", None


def fidelity_rows(live: Mapping[str, Any], twin: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per figure: live, twin, the error (twin - live), the relative error (of the live value; None at
    0), the goal and whether the twin is within it (None without a goal or a figure)."""
    rows = []
    for key, label in FIGURES:
        a, b = live.get(key), twin.get(key)
        known = isinstance(a, int | float) and isinstance(b, int | float)
        err = float(b) - float(a) if known else None
        rel = err / abs(float(a)) if known and err is not None and a else None
        goal, allowed = _goal(key, float(a)) if isinstance(a, int | float) else ("–", None)
        within = None if allowed is None or err is None else abs(err) <= allowed + 1e-9
        rows.append({"figure": label, "key": key, "live": a, "twin": b, "error": err, "error_pct":
                     None if rel is None else 100.0 * rel, "goal": goal, "within": within})
    return rows


def fmt(value: Any, key: str = "") -> str:
    """A cell: '–' for none, counts whole, shares and seconds to 3 significant digits."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "reconfigurations" and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def table_cells(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(header, rows of text cells) of the fidelity table, the same for the console and Markdown."""
    header = ("figure", "live", "twin", "error", "error %", "goal", "within")
    cells = [(r["figure"], fmt(r["live"], r["key"]), fmt(r["twin"], r["key"]),
              "–" if r["error"] is None else ("+" if r["error"] > 0 else "") + fmt(r["error"], r["key"]),
              "–" if r["error_pct"] is None else f"{r['error_pct']:+.0f} %", r["goal"], fmt(r["within"]))
             for r in rows]
    return header, cells


def fidelity_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The fidelity table in Markdown."""
    header, cells = table_cells(rows)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(c) + " |" for c in cells]
    return "\n".join(lines) + "\n"
