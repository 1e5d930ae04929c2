"""Dhalion (Floratou et al., "Dhalion: self-regulating stream processing in Heron", VLDB 2017).

Dhalion detects symptoms, diagnoses them and applies one resolver per round:
- under-provisioning: the operator is the cause of back pressure. With bp the fraction of the period spent
  back-pressured, it processed for (1 - bp) of the time what should have taken the whole period, so the
  scale-up factor is 1 + bp / (1 - bp) (= 1 / (1 - bp)): n' = ceil(n · (1 + bp / (1 - bp))).
- over-provisioning: no back pressure and near-empty queues (backlog below `empty_backlog_s` seconds of input)
  for `down_periods` consecutive periods: n' = min(n - 1, floor(n · scale_down_factor)).
- If back pressure follows a scale-down, the action is undone and that scale-down is black-listed for
  `blacklist_s` seconds.
One action per round; the warm-up after a reconfiguration is respected. Latency-unaware (random node).

Options: `bp_threshold` (0.1: less back pressure is noise), `scale_down_factor` (0.8), `down_periods` (3),
`empty_backlog_s` (5), `blacklist_s` (1800), `max_bp` (0.95: caps the factor at 20).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register


def dhalion_scale_up(n: int, bp: float, max_bp: float = 0.95) -> int:
    """Dhalion's resolver: ceil(n · (1 + bp/(1 - bp))), bp capped at `max_bp`; at least n + 1."""
    bp = min(max(bp, 0.0), max_bp)
    return max(n + 1, math.ceil(n * (1.0 + bp / (1.0 - bp)) - 1e-9))


def dhalion_scale_down(n: int, factor: float) -> int:
    """floor(n · factor), and at least one fewer than n."""
    return max(1, min(n - 1, math.floor(n * factor + 1e-9)))


@register
class DhalionPolicy(Policy):
    """Dhalion: back-pressure-proportional scale-up, cautious scale-down with undo and black-list."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "bp_threshold": "Back-pressure fraction of a period below which it counts as noise.",
        "scale_down_factor": "Scale-down: n' = floor(n * factor), at least one fewer.",
        "down_periods": "Consecutive idle periods (no back pressure, near-empty queues) before a scale-down.",
        "empty_backlog_s": "A queue is near-empty below this many seconds of input (s).",
        "blacklist_s": "A scale-down undone by back pressure is black-listed this long (s).",
        "max_bp": "Back pressure is capped at this in the scale-up factor 1 + bp/(1 - bp).",
    }
    # (lo, hi, lo_open) of an option whose range is not the default (counts >= 1, numbers >= 0).
    option_bounds: ClassVar[dict[str, tuple]] = {
        "max_bp": (0.0, 0.99, False),
        "scale_down_factor": (0.0, 1.0, False),
    }

    id = "dhalion"
    summary = "Dhalion (VLDB'17): n·(1+bp/(1-bp)) under back pressure, ×0.8 when idle queues, undo+blacklist"
    latency_aware = False

    def __init__(
        self,
        bp_threshold: float = 0.1,
        scale_down_factor: float = 0.8,
        down_periods: int = 3,
        empty_backlog_s: float = 5.0,
        blacklist_s: float = 1800.0,
        max_bp: float = 0.95,
    ) -> None:
        self.bp_threshold = bp_threshold
        self.scale_down_factor = scale_down_factor
        self.down_periods = down_periods
        self.empty_backlog_s = empty_backlog_s
        self.blacklist_s = blacklist_s
        self.max_bp = max_bp
        self.idle_streak = 0
        self.last_down: tuple[int, int] | None = None  # (from n, to n) of the latest scale-down
        self.blacklist: dict[int, float] = {}  # target n -> black-listed until (s)

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One Dhalion round (see the module docstring)."""
        n = obs.n
        if ctx.in_warmup:
            return Decision(n, "warm-up")
        bp = obs.bp_upstream
        if bp > self.bp_threshold:
            self.idle_streak = 0
            if self.last_down is not None and self.last_down[1] == n:
                before, after = self.last_down
                self.blacklist[after] = obs.time_s + self.blacklist_s
                self.last_down = None
                return Decision(ctx.clamp(before), f"back pressure after scale-down to {after}: undo, black-list")
            self.last_down = None
            target = ctx.clamp(dhalion_scale_up(n, bp, self.max_bp))
            return Decision(target, f"back pressure {bp:.2f}: scale-up to {target}")
        empty = obs.backlog <= self.empty_backlog_s * max(obs.input_rate, 1.0)
        self.idle_streak = self.idle_streak + 1 if empty else 0
        if self.idle_streak < self.down_periods or n <= ctx.n_min:
            return Decision(n, "healthy")
        target = ctx.clamp(dhalion_scale_down(n, self.scale_down_factor))
        if self.blacklist.get(target, -math.inf) > obs.time_s:
            return Decision(n, f"scale-down to {target} black-listed")
        self.idle_streak = 0
        self.last_down = (n, target)
        return Decision(target, f"no back pressure, empty queues for {self.down_periods} periods")

    def state_dict(self) -> dict[str, Any]:
        """Streak, last scale-down and black-list."""
        return {"idle_streak": self.idle_streak, "last_down": self.last_down,
                "blacklist": {str(k): v for k, v in self.blacklist.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict`."""
        self.idle_streak = int(state.get("idle_streak", 0))
        last = state.get("last_down")
        self.last_down = (int(last[0]), int(last[1])) if last else None
        self.blacklist = {int(k): float(v) for k, v in (state.get("blacklist") or {}).items()}
