"""Daedalus (Pfister et al., "Daedalus: self-adaptive horizontal autoscaling for resource efficiency of
distributed stream processing systems", ICPE 2024).

Daedalus plans a scale-out from three learned pieces and a recovery target:
1. capacity: per scale-out n, an online linear regression of throughput on CPU utilisation, extrapolated to
   100 % CPU (the most that n replicas process); a scale-out not seen yet is extrapolated linearly from the
   nearest one seen (capacity per replica × n);
2. workload forecast: here Holt's linear exponential smoothing (`gesscale.policies.forecast`), the peak over
   the next `forecast_horizon_s`;
3. recovery time: with backlog B, forecast input λ and rescale downtime P (learned from the pauses observed,
   `restart_prior_s` until then), staying at n recovers in B / (C(n) - λ) and moving to m in
   P + (B + λ·P) / (C(m) - λ).
A configuration is feasible when its capacity covers the forecast and its recovery time is within
`recovery_target_s` (600 s). Daedalus keeps the current scale-out while it is feasible, scales in to the
smallest feasible smaller one, otherwise scales out to the smallest feasible larger one (n_max if none), and
never rescales twice within `min_gap_s`. Latency-unaware (random node).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, ClassVar

import numpy as np

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register
from gesscale.policies.forecast import HoltForecaster
from gesscale.policies.signals import PauseTracker, utilisation


class CapacityRegression:
    """Online CPU → throughput regressions, one per replica count (see the module docstring)."""

    def __init__(self, max_samples: int = 60, min_cpu_spread: float = 0.05) -> None:
        self.max_samples = max_samples
        self.min_cpu_spread = min_cpu_spread
        self.samples: dict[int, deque[tuple[float, float]]] = {}

    def add(self, n: int, cpu: float, throughput: float) -> None:
        """One period of n replicas at utilisation `cpu` processing `throughput` records/s."""
        if n < 1 or cpu <= 0.05 or throughput <= 0:
            return
        self.samples.setdefault(n, deque(maxlen=self.max_samples)).append((min(cpu, 1.0), throughput))

    def _fitted(self, n: int) -> float | None:
        pts = self.samples.get(n)
        if not pts:
            return None
        cpu = np.array([p[0] for p in pts])
        thr = np.array([p[1] for p in pts])
        if len(pts) >= 2 and float(cpu.max() - cpu.min()) >= self.min_cpu_spread:
            slope, intercept = np.polyfit(cpu, thr, 1)
            if slope > 0:
                return float(slope + intercept)
        return float(np.mean(thr / cpu))

    def capacity(self, n: int) -> float | None:
        """Records/s that n replicas sustain at 100 % CPU, or None before any sample."""
        direct = self._fitted(n)
        if direct is not None:
            return direct
        if not self.samples:
            return None
        nearest = min(self.samples, key=lambda k: (abs(k - n), k))
        base = self._fitted(nearest)
        return None if base is None else base / nearest * n


def recovery_time_s(backlog: float, rate: float, capacity: float, pause_s: float) -> float:
    """Seconds until the backlog (plus what arrives during `pause_s`) is processed; inf if never."""
    if capacity <= rate:
        return math.inf if backlog + rate * pause_s > 0 else 0.0
    return pause_s + (backlog + rate * pause_s) / (capacity - rate)


@register
class DaedalusPolicy(Policy):
    """Daedalus: capacity regression + workload forecast + recovery-time target (600 s)."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "recovery_target_s": "A configuration is feasible when it recovers the backlog within this long (s).",
        "forecast_horizon_s": "The forecast input is the peak of Holt's forecast over this horizon (s).",
        "min_gap_s": "Never rescale twice within this long (s).",
        "restart_prior_s": "Rescale downtime assumed until a pause has been measured (s).",
    }

    id = "daedalus"
    summary = "Daedalus (ICPE'24): CPU→throughput capacity, Holt forecast, recovery time ≤ 600 s, random node"
    latency_aware = False

    def __init__(
        self,
        recovery_target_s: float = 600.0,
        forecast_horizon_s: float = 600.0,
        min_gap_s: float = 300.0,
        restart_prior_s: float = 120.0,
    ) -> None:
        self.recovery_target_s = recovery_target_s
        self.forecast_horizon_s = forecast_horizon_s
        self.min_gap_s = min_gap_s
        self.capacity = CapacityRegression()
        self.forecaster = HoltForecaster()
        self.pause = PauseTracker(restart_prior_s)

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One Daedalus planning step (see the module docstring)."""
        n = obs.n
        self.forecaster.update(obs.input_rate)
        self.pause.update(obs)
        cpu = utilisation(obs)
        if cpu is not None and obs.paused_s == 0:
            self.capacity.add(n, cpu, obs.throughput)
        if ctx.in_warmup or ctx.since_reconfig_s < self.min_gap_s:
            return Decision(n, "warm-up / minimum gap")
        cap_n = self.capacity.capacity(n)
        if cap_n is None:
            return Decision(n, "no capacity sample yet")
        lam = max(obs.input_rate, self.forecaster.peak(self.forecast_horizon_s / obs.period_s))
        pause = self.pause.estimate_s

        def feasible(m: int) -> bool:
            cap = self.capacity.capacity(m) or 0.0
            p = 0.0 if m == n else pause
            return cap >= lam and recovery_time_s(obs.backlog, lam, cap, p) <= self.recovery_target_s

        if feasible(n):
            for m in range(ctx.n_min, n):
                if feasible(m):
                    return Decision(m, f"scale-in: {m} cover forecast {lam:.0f}/s and recover in time")
            return Decision(n, f"feasible: capacity {cap_n:.0f}/s ≥ forecast {lam:.0f}/s")
        for m in range(n + 1, ctx.n_max + 1):
            if feasible(m):
                return Decision(m, f"scale-out: {m} cover forecast {lam:.0f}/s and recover in time")
        return Decision(ctx.n_max, f"no feasible configuration for {lam:.0f}/s: n_max")

    def state_dict(self) -> dict[str, Any]:
        """Capacity samples, forecaster and the learned pause."""
        return {
            "samples": {str(k): [list(p) for p in v] for k, v in self.capacity.samples.items()},
            "forecaster": self.forecaster.to_dict(),
            "pause_s": self.pause.estimate_s,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict`."""
        for k, pts in (state.get("samples") or {}).items():
            for cpu, thr in pts:
                self.capacity.add(int(k), float(cpu), float(thr))
        if state.get("forecaster"):
            self.forecaster = HoltForecaster.from_dict(state["forecaster"])
        if state.get("pause_s") is not None:
            self.pause.estimate_s = float(state["pause_s"])
