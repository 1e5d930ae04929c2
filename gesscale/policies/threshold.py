"""Threshold baselines of the Gesscale paper: CPU above 90% adds one replica, CPU below 50% removes one.

`thr-nlunaware` picks the node at random (seeded); `thr-nlaware` uses the latency-aware placement. Both wait
for the warm-up after a reconfiguration, like every policy here. CPU is the mean utilisation of the replicas;
when a backend cannot measure it, busy time (processing / capacity) stands in.
"""

from __future__ import annotations

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register


def _cpu(obs: Observation) -> float | None:
    return obs.cpu if obs.cpu is not None else obs.busy


@register
class ThresholdLatencyUnaware(Policy):
    """CPU > cpu_high: +1; CPU < cpu_low: -1; random node."""

    id = "thr-nlunaware"
    summary = "threshold baseline (ICCCN'21): CPU>90% +1, CPU<50% -1, random node"
    latency_aware = False

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One step up or down by the CPU thresholds."""
        n = obs.n
        cpu = _cpu(obs)
        if ctx.in_warmup or cpu is None:
            return Decision(n, "warm-up" if ctx.in_warmup else "no CPU metric")
        if cpu > ctx.config.cpu_high:
            return Decision(ctx.clamp(n + 1), f"CPU {cpu:.0%} > {ctx.config.cpu_high:.0%}")
        if cpu < ctx.config.cpu_low:
            return Decision(ctx.clamp(n - 1), f"CPU {cpu:.0%} < {ctx.config.cpu_low:.0%}")
        return Decision(n, f"CPU {cpu:.0%}")


@register
class ThresholdLatencyAware(ThresholdLatencyUnaware):
    """The same thresholds with the latency-aware placement."""

    id = "thr-nlaware"
    summary = "threshold baseline (ICCCN'21): CPU>90% +1, CPU<50% -1, min-ND_max node"
    latency_aware = True
