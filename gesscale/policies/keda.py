"""KEDA's Apache Kafka scaler (keda.sh, "Apache Kafka" scaler) driving the HPA: `keda-lag`.

The scaler exposes the consumer group's total lag as an external metric with an average-value target of
`lagThreshold` (KEDA's default: 10 records), so the HPA computes

    desired = ceil(total lag / lagThreshold)

capped at the number of partitions (`allowIdleConsumers: false`; here the topic has at least n_max
partitions, so the cap is n_max) and at least n_min. The HPA's tolerance and 300 s scale-down stabilisation
apply (see `gesscale.policies.hpa`). Lag-only: the input rate and the pause a restart causes are invisible to it.
Latency-unaware (random node).

Options: `lag_threshold` (10), `partitions` (None: n_max), `stabilization_s` (300), `tolerance` (0.1).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register
from gesscale.policies.hpa import StabilizationWindow


def keda_desired(total_lag: float, lag_threshold: float, n: int, tolerance: float = 0.1) -> int:
    """ceil(lag / threshold) — or n when lag / (threshold · n) is within the HPA tolerance of 1."""
    if n > 0 and abs(total_lag / (lag_threshold * n) - 1.0) <= tolerance:
        return n
    return math.ceil(total_lag / lag_threshold - 1e-9)


@register
class KedaLagPolicy(Policy):
    """KEDA Kafka scaler: replicas = ceil(total lag / lagThreshold), capped at the partitions."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "lag_threshold": "lagThreshold: the average lag per replica aimed at (records).",
        "partitions": "Most replicas (the topic's partitions); none: n_max.",
        "stabilization_s": "Scale-down stabilisation of the HPA (s).",
        "tolerance": "No change while the lag ratio is within this of 1.",
    }
    # (lo, hi, lo_open) of an option whose range is not the default (counts >= 1, numbers >= 0).
    option_bounds: ClassVar[dict[str, tuple]] = {
        "lag_threshold": (0.0, None, True),
    }

    id = "keda-lag"
    summary = "KEDA Kafka scaler: ceil(total lag / lagThreshold=10), capped at partitions, HPA stabilisation"
    latency_aware = False

    def __init__(
        self,
        lag_threshold: float = 10.0,
        partitions: int | None = None,
        stabilization_s: float = 300.0,
        tolerance: float = 0.1,
    ) -> None:
        self.lag_threshold = lag_threshold
        self.partitions = partitions
        self.tolerance = tolerance
        self.window = StabilizationWindow(stabilization_s)

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One HPA sync on the lag metric."""
        n = obs.n
        if ctx.in_warmup:
            return Decision(n, "warm-up")
        desired = keda_desired(obs.backlog, self.lag_threshold, n, self.tolerance)
        if self.partitions is not None:
            desired = min(desired, self.partitions)
        desired = ctx.clamp(desired)
        applied = self.window.apply(obs.time_s, n, desired)
        return Decision(applied, f"lag {obs.backlog:.0f}: desired {desired}, applied {applied}")

    def state_dict(self) -> dict[str, Any]:
        """The stabilisation window's recommendations."""
        return {"recommendations": self.window.to_list()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict`."""
        self.window.load(state.get("recommendations") or [])
