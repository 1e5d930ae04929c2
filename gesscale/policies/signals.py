"""Signals several policies derive from one `Observation` (no policy here, nothing registered).

- `utilisation`: the busy fraction of the period (Flink's busy time), or the CPU utilisation when the backend
  cannot measure busy time; None when neither is known.
- `true_rate`: the operator's true processing rate, i.e. what it would process at 100 % utilisation —
  throughput / utilisation (DS2's "true processing rate", Kalavri et al., OSDI 2018). Undefined at very low
  utilisation, where the ratio is mostly noise.
- `backlog_at_start`: the backlog when the period began (end backlog minus its growth).
Pure functions, no I/O.
"""

from __future__ import annotations

from gesscale.observation import Observation

MIN_UTILISATION = 0.05


def utilisation(obs: Observation) -> float | None:
    """Busy fraction of the period, else the CPU utilisation, else None."""
    if obs.busy is not None:
        return obs.busy
    return obs.cpu


def true_rate(obs: Observation, min_utilisation: float = MIN_UTILISATION) -> float | None:
    """Records/s the current replicas process when fully busy (throughput / utilisation), or None."""
    u = utilisation(obs)
    if u is None or u < min_utilisation or obs.throughput <= 0:
        return None
    return obs.throughput / min(1.0, u)


def backlog_at_start(obs: Observation) -> float:
    """Backlog (records) when the observed period began."""
    return max(0.0, obs.backlog - obs.backlog_growth)


class PauseTracker:
    """Learns the processing pause a reconfiguration causes from the observations that follow it.

    Consecutive periods with `paused_s > 0` are summed; when a period without pause follows, the sum is one
    measured pause, blended into the estimate (exponential average, weight `weight` on the newest). Until a
    pause has been seen, `prior_s` stands.
    """

    def __init__(self, prior_s: float, weight: float = 0.5) -> None:
        self.estimate_s = float(prior_s)
        self.weight = weight
        self.measured = 0
        self._running = 0.0

    def update(self, obs: Observation) -> None:
        """Take one period's `paused_s`."""
        if obs.paused_s > 0:
            self._running += obs.paused_s
            return
        if self._running > 0:
            if self.measured == 0:
                self.estimate_s = self._running
            else:
                self.estimate_s = self.weight * self._running + (1 - self.weight) * self.estimate_s
            self.measured += 1
            self._running = 0.0
