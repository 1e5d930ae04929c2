"""When a run that replays a finite input is over: the demo's rule, which a simulated twin of a demo run plays
too (docs/experiments.md, "The simulated twin of a live run").

A demo run does not stop when the backlog drains: once the input has stopped and a period observed no input and no
backlog, the controller gets a few more periods to scale the idle replicas in (what it would do in the night trough
of a real day). The run ends at the first such drained period after which one replica is left, or after more than
`periods` drained periods outside the warm-up, or after more than `max_periods` in any case. The reconfigurations
made in those periods are the run's: a twin that stopped at the drain left out the threshold policies' last
scale-ins (2 of their 6 reconfigurations in every run of the live Table III, blocks 1-4).

Pure: the caller says whether the input has stopped and whether a time is in the warm-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the scenario reads the limits; only the rule reads a loop's records
    from gesscale.mape import StepRecord

AFTER_DRAIN_PERIODS = 3
AFTER_DRAIN_MAX_PERIODS = 8


@dataclass(frozen=True)
class AfterDrain:
    """How many drained periods a run gets to scale in (module docstring)."""

    periods: int = AFTER_DRAIN_PERIODS
    max_periods: int = AFTER_DRAIN_MAX_PERIODS

    def to_dict(self) -> dict[str, int]:
        """The scenario's `after_drain` section."""
        return {"periods": self.periods, "max_periods": self.max_periods}

    def rule(self) -> DrainedEnd:
        """A fresh end rule for one run."""
        return DrainedEnd(self)


class DrainedEnd:
    """Counts a run's drained periods and says when it is over (module docstring); one instance per run."""

    def __init__(self, limits: AfterDrain | None = None) -> None:
        self.limits = limits or AfterDrain()
        self.drained = 0

    def over(self, record: StepRecord | None, input_done: bool, in_warmup: Callable[[float], bool]) -> bool:
        """Whether the run ends after the period `record` (the last one; None before the first): it observed no
        input and no backlog once `input_done`, and either one replica is left (after the change it applied, if
        any) or enough drained periods went by. `in_warmup(t)` tells whether time t is in the warm-up."""
        last = record.observation if record is not None else None
        if not (input_done and last is not None and last.backlog < 1.0 and last.input_rate == 0):
            return False
        self.drained += 1
        replicas = len(record.reconfiguration.nodes) if record.applied and record.reconfiguration else last.n
        if replicas <= 1 or self.drained > self.limits.max_periods:
            return True
        return self.drained > self.limits.periods and not in_warmup(last.time_s)
