"""Reference points: the oracle (`ideal`) and a fixed replica count (`static`)."""

from __future__ import annotations

from typing import ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register


@register
class IdealPolicy(Policy):
    """Knows the demand of the next period (ground truth) and reconfigures instantly, with no pause.

    Only a simulator can offer this; it bounds what any policy could achieve.
    """

    id = "ideal"
    summary = "oracle: the ideal replica count of the next period, instant reconfiguration"
    latency_aware = True
    instant = True

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """Follow the oracle's demand."""
        if ctx.oracle_demand is None:
            return Decision(obs.n, "no oracle on this backend")
        start = obs.time_s
        return Decision(ctx.clamp(ctx.oracle_demand(start, start + ctx.config.control_period_s)), "oracle")


@register
class StaticPolicy(Policy):
    """A fixed number of replicas (default: keep whatever the run started with)."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "replicas": "The fixed replica count; none: keep the count the run started with.",
    }

    id = "static"
    summary = "fixed replica count (the initial one unless replicas= is given)"
    latency_aware = True

    def __init__(self, replicas: int | None = None) -> None:
        self.replicas = replicas

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """Hold the configured count."""
        return Decision(ctx.clamp(self.replicas) if self.replicas else obs.n, "static")
