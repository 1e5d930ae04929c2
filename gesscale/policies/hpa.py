"""Kubernetes Horizontal Pod Autoscaler rules: `hpa-cpu` and `hpa-varga`.

The HPA algorithm (kubernetes.io, "Horizontal Pod Autoscaling", algorithm details):

    desired = ceil(n · current_metric / target_metric)

skipped when the ratio is within the tolerance (|ratio - 1| <= 0.1). Scale-down is stabilised: the
replica count applied is the highest recommendation of the last `stabilization_s` seconds (default 300 s),
so a short dip does not remove pods; scale-up applies at once (scale-up stabilisation 0 s by default).

- `hpa-cpu`: the metric is the mean CPU utilisation of the replicas, target 0.7.
- `hpa-varga`: Varga et al. (Acta Univ. Sapientiae, Informatica 2021) drive the HPA with a Flink-specific
  utilisation instead of CPU: the busy-time ratio, raised by the relative lag growth — here
  u = busy · (1 + max(0, Δlag / period) / throughput), the utilisation the operator would need to also absorb
  what piled up (under back pressure busy = 1 and u = input / capacity) — with the same target 0.7 and the
  same stabilisation.
Both respect the warm-up after a reconfiguration (the HPA ignores pods that are not ready) and are
latency-unaware (random node).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import deque
from typing import Any, ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register
from gesscale.policies.signals import utilisation


def hpa_desired(n: int, metric: float, target: float, tolerance: float = 0.1) -> int:
    """ceil(n · metric / target), or n when the ratio is within the tolerance."""
    ratio = metric / target
    if abs(ratio - 1.0) <= tolerance:
        return n
    return max(0, math.ceil(n * ratio - 1e-9))


class StabilizationWindow:
    """The HPA's scale-down stabilisation: apply the highest recommendation of the last `window_s` seconds."""

    def __init__(self, window_s: float = 300.0) -> None:
        self.window_s = window_s
        self.recommendations: deque[tuple[float, int]] = deque()

    def apply(self, now_s: float, current: int, desired: int) -> int:
        """Record `desired` at `now_s` and return the replica count to apply."""
        self.recommendations.append((now_s, desired))
        while self.recommendations and self.recommendations[0][0] < now_s - self.window_s:
            self.recommendations.popleft()
        if desired >= current:
            return desired
        return min(current, max(d for _, d in self.recommendations))

    def to_list(self) -> list[list[float]]:
        """JSON form."""
        return [[t, d] for t, d in self.recommendations]

    def load(self, items: list[list[float]]) -> None:
        """Restore from `to_list`."""
        self.recommendations = deque((float(t), int(d)) for t, d in items)


class _HPABase(Policy):
    """The HPA loop around a metric; subclasses say which metric."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "target": "Target utilisation the HPA compares its metric with.",
        "tolerance": "No change while abs(metric / target - 1) is within this.",
        "stabilization_s": "Scale-down stabilisation: the highest recommendation of this long applies (s).",
    }
    # (lo, hi, lo_open) of an option whose range is not the default (counts >= 1, numbers >= 0).
    option_bounds: ClassVar[dict[str, tuple]] = {
        "target": (0.0, None, True),
    }

    latency_aware = False

    def __init__(self, target: float = 0.7, tolerance: float = 0.1, stabilization_s: float = 300.0) -> None:
        self.target = target
        self.tolerance = tolerance
        self.window = StabilizationWindow(stabilization_s)

    @abstractmethod
    def metric(self, obs: Observation) -> float | None:
        """The utilisation the HPA compares with its target."""

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One HPA sync (see the module docstring)."""
        n = obs.n
        if ctx.in_warmup:
            return Decision(n, "warm-up")
        m = self.metric(obs)
        if m is None:
            return Decision(n, "no metric")
        desired = ctx.clamp(hpa_desired(n, m, self.target, self.tolerance))
        applied = self.window.apply(obs.time_s, n, desired)
        return Decision(applied, f"metric {m:.2f} / target {self.target:.2f}: desired {desired}, applied {applied}")

    def state_dict(self) -> dict[str, Any]:
        """The stabilisation window's recommendations."""
        return {"recommendations": self.window.to_list()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict`."""
        self.window.load(state.get("recommendations") or [])


@register
class HPACPUPolicy(_HPABase):
    """Kubernetes HPA on CPU utilisation, target 70 %, 300 s scale-down stabilisation."""

    id = "hpa-cpu"
    summary = "Kubernetes HPA: ceil(n·cpu/0.7), tolerance 0.1, 300 s scale-down stabilisation, random node"

    def metric(self, obs: Observation) -> float | None:
        """Mean CPU utilisation (busy time when the backend has no CPU metric)."""
        return obs.cpu if obs.cpu is not None else obs.busy


def varga_utilisation(obs: Observation) -> float | None:
    """busy · (1 + max(0, Δlag / period) / throughput); None without a busy/CPU metric."""
    busy = utilisation(obs)
    if busy is None:
        return None
    growth = max(0.0, obs.backlog_growth / obs.period_s)
    if obs.throughput <= 0:
        return busy if growth == 0 else max(busy, 1.0)
    return busy * (1.0 + growth / obs.throughput)


@register
class HPAVargaPolicy(_HPABase):
    """The HPA rule on Varga et al.'s busy-time-and-lag utilisation."""

    id = "hpa-varga"
    summary = "HPA (Varga et al. '21): ceil(n·u/0.7), u = busy·(1 + lag growth/throughput), 300 s stabilisation"

    def metric(self, obs: Observation) -> float | None:
        """Busy-time and lag utilisation (see `varga_utilisation`)."""
        return varga_utilisation(obs)
