"""How well a simulated twin predicted its live run: the same four figures of both, and the errors
(docs/experiments.md, "The simulated twin of a live run").

Live, from the periods the loop observed (`gesscale.twin` reads the same periods to build the twin):
- reconfigurations: the scale-ups and scale-downs carried out (`scale_changes`: the moves counted apart, as the
  simulator counts them);
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
import statistics
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
    tell (no periods, no input, replicas not recorded), and when no observation saw the run complete (the run
    was stopped inside a reconfiguration that outlasted its deadline: what the replicas cost after its last
    observation is unknown; live Table III, gesscale-plus-b5, a 1 -> 6 change of 277 s, counted 0.12)."""
    out: dict[str, float | None] = {"replica_minutes": None, "avg_replicas": None, "span_s": None, "excess": None}
    t0, rates = input_per_second(periods)
    if not periods or not rates:
        return out
    input_end = t0 + len(rates)
    times = [float(p["time_s"]) for p in periods]
    backlogs = [float(p.get("backlog") or 0.0) for p in periods]
    done = completion_index(times, backlogs, input_end)
    if not (times[done] >= input_end - 1.0 and backlogs[done] < 1.0):  # no observation saw the run complete
        return out
    completion = times[done]
    out["excess"] = max(0.0, completion - input_end) / len(rates)
    if all(isinstance(p.get("replicas"), list | tuple) for p in periods[: done + 1]):
        replica_s = replica_seconds(times[: done + 1], [len(p["replicas"]) for p in periods[: done + 1]], t0)
        span = completion - t0
        out["replica_minutes"] = replica_s / 60.0
        out["span_s"] = span
        out["avg_replicas"] = replica_s / span if span > 0 else None
    return out


def completion_index(times: Sequence[float], backlogs: Sequence[float], input_end: float) -> int:
    """The observation a run completes at: the first at or after the end of the input (within a second) with no
    backlog; the last observation when none is."""
    return next((i for i, (t, b) in enumerate(zip(times, backlogs, strict=True)) if t >= input_end - 1.0 and b < 1.0),
                len(times) - 1)


def replica_seconds(times: Sequence[float], replicas: Sequence[int], t0: float) -> float:
    """Each observation's replicas times the time since the observation before it (`t0` before the first)."""
    starts = [t0, *times[:-1]]
    return float(sum(n * (b - a) for n, a, b in zip(replicas, starts, times, strict=True)))


def observed_replica_minutes(history: Sequence[Any], input_end_s: float) -> float | None:
    """The replica-minutes of a simulated run measured as a live run's are (`resources`): at its observations
    (`StepRecord`s, the first period starting at 0), until the first one with no backlog once the input ended.
    The simulator's `cost` counts each second's replicas until the last second with backlog instead; the live
    loop knows the backlog only at its observations, up to a reconfiguration's observation gap (50-60 s on the
    testbed) after it drained, and pays the replicas until then: the twin, observed the same way, pays them too.
    None without observations."""
    if not history:
        return None
    times = [float(h.observation.time_s) for h in history]
    done = completion_index(times, [float(h.observation.backlog) for h in history], input_end_s)
    return replica_seconds(times[: done + 1], [h.observation.n for h in history[: done + 1]], 0.0) / 60.0


def scale_changes(reconfigurations: Sequence[Mapping[str, Any]]) -> int:
    """A live run's reconfigurations as the simulator counts them: its scale-ups and scale-downs, the moves
    counted apart (docs/metrics.md), a replacement of lost replicas being a scale-up."""
    return sum(1 for r in reconfigurations if r.get("kind") != "move")


def observed(periods: Sequence[Mapping[str, Any]], reconfigurations: int,
             latency: Mapping[str, Any] | None) -> dict[str, float | int | None]:
    """The live run's figures (module docstring); None where the periods cannot tell (no replicas recorded)."""
    cost = resources(periods)
    return {"reconfigurations": reconfigurations, "replica_minutes": cost["replica_minutes"],
            "excess": cost["excess"], "p95_latency_s": (latency or {}).get("p95_s")}


def predicted(medians: Mapping[str, Any], latency: Mapping[str, Any] | None,
              runs: Sequence[Any] = ()) -> dict[str, float | int | None]:
    """The twin's figures: the simulator's medians of one policy (`gesscale.report.summary`) and its simulated
    latency (`gesscale.report.simulated_latency`'s `by_policy` entry); with its `runs` (`RunResult`s), the
    replica-minutes measured at the observations as the live run's are (the median of their `observed_cost`,
    `observed_replica_minutes`), else the simulator's `cost`."""
    observed = [r.observed_cost for r in runs if getattr(r, "observed_cost", None) is not None]
    minutes = statistics.median(observed) if observed else medians.get("cost")
    return {"reconfigurations": medians.get("reconfigurations"), "replica_minutes": minutes,
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
