"""The Apache Flink Kubernetes operator's job autoscaler (flink-autoscaler module), for one vertex:
`flink-autoscaler`.

Per vertex, over a metric window after a stabilisation interval, the autoscaler evaluates the average input
rate λ (TARGET_DATA_RATE), the lag, and the true processing rate TPR = throughput / busy-time ratio. The
target processing capacity is

    target = lag / catch_up + λ · restart / catch_up + λ / target_utilisation

(lag caught up within the catch-up duration, plus what accumulates during the restart, plus the input at the
target utilisation). The vertex is rescaled only when TPR leaves the band given by the utilisation boundary:
scale-up when TPR < the target computed at utilisation (target + boundary), scale-down when TPR > the target
at (target - boundary). The new parallelism is ceil(n · target / TPR) (linear scaling assumed); a scale-down
removes at most `scale_down_max_factor` of the parallelism and is delayed by `scale_down_interval_s`: it
happens only once it has been recommended for that long (the highest recommendation of the interval wins;
any recommendation at or above n cancels it).

Defaults are the operator's: stabilisation 5 min, metric window 15 min, target utilisation 0.7, boundary
0.3, restart time 5 min, catch-up duration 30 min, scale-down interval 1 h, scale-down max factor 0.6.
Latency-unaware (random node).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register
from gesscale.policies.signals import true_rate


def target_capacity(input_rate: float, lag: float, utilisation: float, restart_s: float, catch_up_s: float) -> float:
    """lag / catch_up + input · restart / catch_up + input / utilisation (records/s)."""
    catch_up_rate = lag / catch_up_s if catch_up_s > 0 else 0.0
    restart_rate = input_rate * restart_s / catch_up_s if catch_up_s > 0 else 0.0
    return catch_up_rate + restart_rate + input_rate / utilisation


@register
class FlinkAutoscalerPolicy(Policy):
    """Flink Kubernetes operator autoscaler: busy-time true rate, catch-up and restart-aware target capacity."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "stabilization_s": "No decision this long after a rescale (s).",
        "window_s": "Metric window the rates are averaged over (s).",
        "target_utilisation": "Target busy-time utilisation of the new parallelism.",
        "boundary": "No rescale while utilisation is within target +- this.",
        "restart_s": "Restart time the target capacity provisions for (s).",
        "catch_up_s": "The lag is to be caught up within this long (s).",
        "scale_down_interval_s": "A scale-down waits this long after the last scale-up (s).",
        "scale_down_max_factor": "A scale-down removes at most this fraction of the parallelism.",
    }
    # (lo, hi, lo_open) of an option whose range is not the default (counts >= 1, numbers >= 0).
    option_bounds: ClassVar[dict[str, tuple]] = {
        "target_utilisation": (0.0, 1.0, True),
        "scale_down_max_factor": (0.0, 1.0, False),
    }

    id = "flink-autoscaler"
    summary = "Flink K8s operator autoscaler: lag/catch-up + input·restart/catch-up + input/0.7, 1 h scale-down delay"
    latency_aware = False

    def __init__(
        self,
        stabilization_s: float = 300.0,
        window_s: float = 900.0,
        target_utilisation: float = 0.7,
        boundary: float = 0.3,
        restart_s: float = 300.0,
        catch_up_s: float = 1800.0,
        scale_down_interval_s: float = 3600.0,
        scale_down_max_factor: float = 0.6,
    ) -> None:
        self.stabilization_s = stabilization_s
        self.window_s = window_s
        self.target_utilisation = target_utilisation
        self.boundary = boundary
        self.restart_s = restart_s
        self.catch_up_s = catch_up_s
        self.scale_down_interval_s = scale_down_interval_s
        self.scale_down_max_factor = scale_down_max_factor
        self.window: list[tuple[float, float, float]] = []  # (time, input rate, true rate)
        self.down_since: float | None = None
        self.down_target = 0

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """Collect one period; evaluate once the window after stabilisation is full."""
        n = obs.n
        # Metrics of a period that overlaps the stabilisation interval after a rescale are discarded.
        if ctx.since_reconfig_s < self.stabilization_s + obs.period_s:
            self.window.clear()
            return Decision(n, "stabilising")
        tpr = true_rate(obs)
        if tpr is not None:
            self.window.append((obs.time_s, obs.input_rate, tpr))
        self.window = [w for w in self.window if w[0] > obs.time_s - self.window_s]
        if len(self.window) * obs.period_s < self.window_s:
            return Decision(n, f"collecting metrics ({len(self.window)} periods)")
        lam = sum(w[1] for w in self.window) / len(self.window)
        tpr_avg = sum(w[2] for w in self.window) / len(self.window)
        lag = obs.backlog

        def capacity(util: float) -> float:
            return target_capacity(lam, lag, util, self.restart_s, self.catch_up_s)

        upper = capacity(min(1.0, self.target_utilisation + self.boundary))
        lower = capacity(max(1e-3, self.target_utilisation - self.boundary))
        if upper <= tpr_avg <= lower:
            self.down_since = None
            return Decision(n, f"true rate {tpr_avg:.0f}/s within [{upper:.0f}, {lower:.0f}]")
        wanted = math.ceil(n * capacity(self.target_utilisation) / tpr_avg - 1e-9)
        wanted = max(wanted, math.ceil(n * (1 - self.scale_down_max_factor) - 1e-9))
        wanted = ctx.clamp(wanted)
        if wanted >= n:
            self.down_since = None
            if wanted == n:
                return Decision(n, "no change")
            self.window.clear()
            return Decision(wanted, f"true rate {tpr_avg:.0f}/s < {upper:.0f}/s needed: scale up")
        if self.down_since is None:
            self.down_since, self.down_target = obs.time_s, wanted
            return Decision(n, f"scale-down to {wanted} delayed {self.scale_down_interval_s:.0f}s")
        self.down_target = max(self.down_target, wanted)
        if obs.time_s - self.down_since < self.scale_down_interval_s:
            return Decision(n, f"scale-down to {self.down_target} delayed")
        target, self.down_since = self.down_target, None
        self.window.clear()
        return Decision(target, f"true rate {tpr_avg:.0f}/s > {lower:.0f}/s for the scale-down interval")

    def state_dict(self) -> dict[str, Any]:
        """Metric window and the pending scale-down."""
        return {"window": [list(w) for w in self.window], "down_since": self.down_since,
                "down_target": self.down_target}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict`."""
        self.window = [(float(a), float(b), float(c)) for a, b, c in state.get("window") or []]
        self.down_since = state.get("down_since")
        self.down_target = int(state.get("down_target", 0))
