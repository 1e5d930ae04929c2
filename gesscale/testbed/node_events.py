"""Node events on the local testbed: crash, leave, join and churn, acted out at their times (docs/events.md).

A run's node events (`gesscale run --events FILE`, `gesscale demo --events FILE`, a map's own `changes:`) become
a list of actions on the run's clock (t = 0 at the controller's start, the day's start in the demo: the clock of
the link events, `LocalBackend.started_s`):

- `crash`: the node's worker and everything it launched are killed at once (SIGKILL to its process group, then
  every process left in its CPU and network groups); `back` after `duration_s` (none: never);
- `leave`: `cordon` at `t_s` (the placement no longer chooses it; it keeps serving), `drained` after `drain_s`
  (a replica still there is removed through the backend, as a scale-down);
- `join`: `join` at `t_s`; a node whose first node event is a join is `absent` from t = 0 (a replica on it is
  removed as after a drain);
- `churn`: its crashes (`gesscale.events.churn_crashes`, from its seed), each with its `back`.

`node_actions` (pure) makes the list from the run's `EventSchedule`; `NodeEventDriver` (a thread) waits for each
action's time and hands it to the backend (`LocalBackend.node_event`), recording what was done, when and how late
(`node-events.jsonl`). Which nodes are schedulable at a time is the schedule's business
(`EventSchedule.node_state`), so the backend and the simulator agree on it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gesscale.events import EventSchedule, FogEvent

log = logging.getLogger(__name__)

# What a node event does on the testbed, in the order applied at equal times (declaration order within a kind).
ACTIONS = ("absent", "crash", "back", "cordon", "drained", "join")
RECORD_FILE = "node-events.jsonl"


@dataclass(frozen=True)
class NodeAction:
    """One thing to do to a fog node at `t_s` seconds of the run, and the event it comes from."""

    t_s: float
    action: str  # one of ACTIONS
    node: str
    event: FogEvent | None = None  # None for `absent` (the node's first event is a join)

    def to_dict(self) -> dict[str, Any]:
        """The action as the run's record writes it."""
        d: dict[str, Any] = {"t_s": round(self.t_s, 3), "action": self.action, "node": self.node}
        if self.event is not None:
            d["event"] = self.event.to_dict()
        return d


def node_actions(schedule: EventSchedule, nodes: Iterable[str]) -> list[NodeAction]:
    """The actions the node events of `schedule` call for on the testbed's `nodes`, in time order (events of
    other nodes of the map are left out: the testbed does not run them, the controller never sees them)."""
    keep = set(nodes)
    out: list[NodeAction] = []
    joins_first: set[str] = set()
    seen: set[str] = set()
    for e in schedule.expanded:
        if e.kind not in ("crash", "leave", "join") or e.nodes[0] not in keep:
            continue
        node = e.nodes[0]
        if node not in seen and e.kind == "join":
            joins_first.add(node)
        seen.add(node)
        if e.kind == "crash":
            out.append(NodeAction(e.t_s, "crash", node, e))
            if e.duration_s is not None:
                out.append(NodeAction(e.t_s + e.duration_s, "back", node, e))
        elif e.kind == "leave":
            out.append(NodeAction(e.t_s, "cordon", node, e))
            out.append(NodeAction(e.t_s + (e.drain_s or 0.0), "drained", node, e))
        else:
            out.append(NodeAction(e.t_s, "join", node, e))
    out.extend(NodeAction(0.0, "absent", n) for n in sorted(joins_first))
    order = {a: k for k, a in enumerate(ACTIONS)}
    return sorted(out, key=lambda a: (a.t_s, order[a.action]))


class NodeEventDriver:
    """Acts out `actions` at `t0_unix + t_s` through `apply(action) -> details`, on a thread of its own.

    Each action applied is kept in `applied` (and appended to `record`, JSON lines): the action, `at` (the unix
    time it was applied), `late_s` (after its due time) and the backend's details; an action that raised is kept
    with its `error` and the run goes on. `stop()` (or `cancelled()` turning true) ends the thread before the
    next action. `clock` and `wait` are the wall clock and a stoppable sleep (tests give their own).
    """

    def __init__(self, actions: Iterable[NodeAction], apply: Callable[[NodeAction], dict[str, Any]],
                 t0_unix: float, *, record: Path | None = None, cancelled: Callable[[], bool] = lambda: False,
                 clock: Callable[[], float] = time.time) -> None:
        self.actions = list(actions)
        self.t0_unix = t0_unix
        self.applied: list[dict[str, Any]] = []
        self._apply = apply
        self._record = record
        self._cancelled = cancelled
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> NodeEventDriver:
        """Run the actions on a daemon thread (nothing to do: no thread)."""
        if self.actions:
            self._thread = threading.Thread(target=self.run, name="gesscale-node-events", daemon=True)
            self._thread.start()
        return self

    def run(self) -> None:
        """Apply every action at its time (the thread's body; a test calls it directly)."""
        for action in self.actions:
            if self._stop.wait(max(0.0, self.t0_unix + action.t_s - self._clock())):
                return
            if self._cancelled():
                return
            self.apply_now(action)

    def apply_now(self, action: NodeAction) -> dict[str, Any]:
        """Apply one action now and record it."""
        at = self._clock()
        entry: dict[str, Any] = {**action.to_dict(), "at": round(at, 3),
                                 "late_s": round(at - self.t0_unix - action.t_s, 3)}
        try:
            entry.update(self._apply(action))
        except Exception as err:  # noqa: BLE001 - one failed action is recorded; the run and later events go on
            entry["error"] = f"{type(err).__name__}: {err}"
            log.warning("node event %s %s at t=%g s failed: %s", action.action, action.node, action.t_s, err)
        else:
            log.info("node event: %s %s at t=%g s (%.3f s late)", action.action, action.node, action.t_s,
                     entry["late_s"])
        self.applied.append(entry)
        if self._record is not None:
            with contextlib.suppress(OSError), self._record.open("a") as fh:
                fh.write(json.dumps(entry) + "\n")
        return entry

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop before the next action (one under way finishes)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


def replacement_times(applied: Iterable[dict[str, Any]], reconfigurations: Iterable[dict[str, Any]],
                      testbed_t0_unix: float) -> list[dict[str, Any]]:
    """For each node event that took a replica away (`lost` in its record), when the controller's replacement
    took effect: the first reconfiguration whose reason starts with `replace` decided at or after the loss, its
    `effective_s` (the first batch of the new placement; controller's clock, 0 = `testbed_t0_unix`) minus the
    loss's time on that clock. `replaced_after_s` is None while no replacement took effect."""
    recs = sorted((r for r in reconfigurations
                   if str(r.get("reason", "")).startswith("replace") and r.get("time_s") is not None),
                  key=lambda r: r["time_s"])
    out = []
    for entry in applied:
        if not entry.get("lost"):
            continue
        lost_s = entry["at"] - testbed_t0_unix
        rec = next((r for r in recs if r["time_s"] >= lost_s), None)
        effective = rec.get("effective_s") if rec is not None else None
        out.append({"node": entry["node"], "action": entry["action"], "lost_s": round(lost_s, 3),
                    "replaced_by": list(rec["added"]) if rec is not None else [],
                    "decided_s": rec["time_s"] if rec is not None else None,
                    "effective_s": effective,
                    "replaced_after_s": round(effective - lost_s, 3) if effective is not None else None})
    return out
