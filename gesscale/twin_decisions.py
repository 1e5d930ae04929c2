"""A live run's decisions against its simulated twin's: the same kinds in the same order, each within a tolerance
(issue 32: "the same event file in the simulator gives the same kinds of decisions in the same order as the live
run, each within ±2 periods"; docs/events.md, "The twin's decisions against the run's").

A decision here is a reconfiguration the loop made (`gesscale.mape.ControlLoop.step`), by kind: `up`, `down`,
`move` (add the better node first, then remove the worse one) and `replace` (an `up` that replaces lost
replicas: its reason starts with `replace`). The live run's come from its report's `reconfigurations` (each with
the decision's `time_s` on the controller's clock, its `kind` and `reason`), the twin's from the simulator's
history of the live policy (`StepRecord.reconfiguration` of the periods that applied one, in simulator seconds,
moved onto the controller's clock by the twin's t = 0, `gesscale.twin.build_twin`'s `zero_s`).

The two lists are aligned in order: the most pairs of the same kind within the tolerance whose order is the same
in both (a longest common subsequence under that rule; among as many pairs, the smallest total time apart).
Every live decision is then matched or missing in the twin, and every twin decision left over is one the run did
not make. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

TOLERANCE_PERIODS = 2
KINDS = ("up", "down", "move", "replace")


@dataclass(frozen=True)
class Decision:
    """One reconfiguration decided: when (s, controller's clock), its kind, and what it changed (`+fog3 -fog1`)."""

    time_s: float
    kind: str
    nodes: str = ""


def decision_kind(kind: str, reason: str | None) -> str:
    """The kind compared: the reconfiguration's own, `replace` for a scale-up that replaces lost replicas."""
    return "replace" if kind == "up" and (reason or "").startswith("replace") else kind


def _nodes(added: Iterable[str], removed: Iterable[str]) -> str:
    return " ".join([*(f"+{n}" for n in added), *(f"-{n}" for n in removed)])


def live_decisions(reconfigurations: Sequence[Mapping[str, Any]]) -> list[Decision]:
    """The live run's decisions from its report's `reconfigurations` (or `reconfigurations.jsonl`), in time
    order; a record without a decision time is left out."""
    out = [Decision(float(r["time_s"]), decision_kind(str(r["kind"]), r.get("reason")),
                    _nodes(r.get("added") or (), r.get("removed") or ()))
           for r in reconfigurations if r.get("time_s") is not None]
    return sorted(out, key=lambda d: d.time_s)


def simulated_decisions(history: Sequence[Any], zero_s: float = 0.0) -> list[Decision]:
    """A simulated run's decisions (`RunResult.history`: the periods that applied a reconfiguration), each at
    its simulator time plus `zero_s` (the twin's t = 0 on the live controller's clock)."""
    return [Decision(float(h.reconfiguration.time_s) + zero_s,
                     decision_kind(h.reconfiguration.kind, h.reconfiguration.reason),
                     _nodes(h.reconfiguration.added, h.reconfiguration.removed))
            for h in history if h.applied and h.reconfiguration is not None]


def align(live: Sequence[Decision], twin: Sequence[Decision],
          tolerance_s: float) -> list[tuple[int | None, int | None]]:
    """The pairs (live index, twin index) of the alignment (module docstring), in order, with (i, None) for a
    live decision the twin did not make and (None, j) for a twin decision the run did not make."""
    n, m = len(live), len(twin)
    # best[i][j]: (pairs, -total time apart) of the best alignment of live[i:] and twin[j:]
    best = [[(0, 0.0)] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            options = [best[i + 1][j], best[i][j + 1]]
            gap = abs(twin[j].time_s - live[i].time_s)
            if twin[j].kind == live[i].kind and gap <= tolerance_s + 1e-9:
                pairs, cost = best[i + 1][j + 1]
                options.append((pairs + 1, cost - gap))
            best[i][j] = max(options)
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    while i < n and j < m:
        gap = abs(twin[j].time_s - live[i].time_s)
        if twin[j].kind == live[i].kind and gap <= tolerance_s + 1e-9:
            pairs, cost = best[i + 1][j + 1]
            if best[i][j] == (pairs + 1, cost - gap):
                out.append((i, j))
                i, j = i + 1, j + 1
                continue
        if best[i][j] == best[i + 1][j]:
            out.append((i, None))
            i += 1
        else:
            out.append((None, j))
            j += 1
    out += [(k, None) for k in range(i, n)] + [(None, k) for k in range(j, m)]
    # a twin decision left over is listed where it falls in time among the live ones
    return _in_time(out, live, twin)


def _in_time(pairs: list[tuple[int | None, int | None]], live: Sequence[Decision],
             twin: Sequence[Decision]) -> list[tuple[int | None, int | None]]:
    def at(p: tuple[int | None, int | None]) -> float:
        return live[p[0]].time_s if p[0] is not None else twin[p[1]].time_s  # type: ignore[index]

    return sorted(pairs, key=at)


def _what(d: Decision) -> str:
    return f" ({d.nodes})" if d.nodes else ""


def _at(t: float) -> str:
    """A time as the table shows it (whole seconds of the value to 0.1 s the rows keep)."""
    return f"{round(t, 1):.0f}"


def compare(live: Sequence[Decision], twin: Sequence[Decision], period_s: float,
            tolerance_periods: float = TOLERANCE_PERIODS) -> dict[str, Any]:
    """Each live decision matched with the twin's (same kind, same order, within `tolerance_periods` control
    periods of `period_s`) or not, the twin's left over, and one line per difference: `rows` (in time order:
    `live_s`, `live`, `twin_s`, `twin`, `dt_s` twin - live, `status` `same`, `missing` or `extra`), `matched`,
    `differences` and `same` (every live decision matched and none left over)."""
    tolerance = tolerance_periods * period_s
    rows, differences = [], []
    for i, j in align(live, twin, tolerance):
        a = live[i] if i is not None else None
        b = twin[j] if j is not None else None
        status = "same" if a and b else "missing" if a else "extra"
        rows.append({"live_s": None if a is None else round(a.time_s, 1), "live": None if a is None else a.kind,
                     "live_nodes": None if a is None else a.nodes,
                     "twin_s": None if b is None else round(b.time_s, 1), "twin": None if b is None else b.kind,
                     "twin_nodes": None if b is None else b.nodes,
                     "dt_s": round(b.time_s - a.time_s, 1) if a and b else None, "status": status})
        if a is not None and b is None:
            near = min((d for d in twin if d.kind == a.kind), key=lambda d: abs(d.time_s - a.time_s), default=None)
            where = ("the twin made none" if near is None else
                     f"the twin's nearest {a.kind} at {_at(near.time_s)} s ({near.time_s - a.time_s:+.0f} s)")
            differences.append(f"live {a.kind} at {_at(a.time_s)} s{_what(a)} not in the twin within "
                               f"±{tolerance:g} s in order: {where}")
        elif b is not None and a is None:
            differences.append(f"twin {b.kind} at {_at(b.time_s)} s{_what(b)}: the run made none")
    matched = sum(1 for r in rows if r["status"] == "same")
    return {"period_s": period_s, "tolerance_s": tolerance, "live": len(live), "twin": len(twin),
            "matched": matched, "same": matched == len(live) == len(twin), "rows": rows,
            "differences": differences}


def compare_seeds(reconfigurations: Sequence[Mapping[str, Any]], histories: Mapping[int, Sequence[Any]],
                  zero_s: float, period_s: float, policy: str) -> dict[str, Any]:
    """The live run's decisions against the twin's of each seed (`histories`: seed -> `RunResult.history` of the
    live policy): the report's `twin_decisions` (`policy`, `live` decisions, per seed the `compare` result, and
    in how many seeds the twin made the same decisions)."""
    live = live_decisions(reconfigurations)
    seeds = {int(s): compare(live, simulated_decisions(h, zero_s), period_s) for s, h in histories.items()}
    return {"policy": policy, "live": [asdict(d) for d in live], "zero_s": zero_s, "seeds": seeds,
            "same_in": sum(1 for r in seeds.values() if r["same"]), "of": len(seeds)}


def decision_cells(result: Mapping[str, Any]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(header, rows of text cells) of one seed's comparison (`compare`): at most 70 characters a row."""
    header = ("live t s", "live", "twin t s", "twin", "Δt s", "")

    def t(v: float | None) -> str:
        return "–" if v is None else f"{v:.0f}"

    cells = [(t(r["live_s"]), r["live"] or "–", t(r["twin_s"]), r["twin"] or "–",
              "–" if r["dt_s"] is None else f"{r['dt_s']:+.0f}" if round(r["dt_s"]) else "0",
              {"same": "same", "missing": "not in twin", "extra": "not live"}[r["status"]])
             for r in result["rows"]]
    return header, cells
