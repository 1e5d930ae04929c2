"""Is a node's userspace emulation really delaying packets? A pure verdict over agent snapshots.

`--queue-bypass` turns a dead daemon into a network without latency, and even without it a hung daemon looks
like a slow network; neither may pass as emulated. A node is healthy when: a daemon carrying its label runs
(and its PID file names a live process), its queue is bound, every rule of the plan is in place, its counters
file is fresh, and — comparing with the previous snapshot — whenever the rules matched new packets the daemon
received new packets too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STALE_S = 5.0  # the daemon rewrites its counters every 0.5 s


@dataclass(frozen=True)
class Health:
    """A node's verdict: ok, or the reasons it is not."""

    node: str
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def judge_health(node: str, snap: Mapping[str, Any], expected_rules: int,
                 previous: Mapping[str, Any] | None = None, stale_s: float = STALE_S) -> Health:
    """The verdict for one snapshot (see the module docstring); `previous` enables the progress check."""
    problems = []
    if not snap.get("pids"):
        problems.append("no delay daemon is running")
    elif snap.get("pid_file") is None:
        problems.append("the daemon's PID file names no live process")
    if not snap.get("queue_bound"):
        problems.append(f"nothing listens on NFQUEUE {snap.get('queue')}")
    if int(snap.get("rules", 0)) != expected_rules:
        problems.append(f"{snap.get('rules', 0)} of {expected_rules} tagged rules in place")
    stats = snap.get("stats")
    if snap.get("pids"):
        if not stats:
            problems.append("the daemon has written no counters")
        elif float(snap.get("now", 0)) - float(stats.get("updated", 0)) > stale_s:
            problems.append(f"the daemon's counters are older than {stale_s:g} s (hung?)")
        elif stats.get("reload_error"):
            problems.append(f"the last link table was refused: {stats['reload_error']}")
    if previous is not None and stats and previous.get("stats"):
        matched = int(snap.get("rule_packets", 0)) - int(previous.get("rule_packets", 0))
        received = int(stats.get("received", 0)) - int(previous["stats"].get("received", 0))
        same_daemon = stats.get("pid") == previous["stats"].get("pid")
        if matched > 0 and received <= 0 and same_daemon:
            problems.append(f"the rules matched {matched} packets but the daemon received none")
    return Health(node, tuple(problems))
