"""DS2 (Kalavri et al., "Three steps is all you need: fast, accurate, automatic scaling decisions for
distributed streaming dataflows", OSDI 2018), for one operator fed by a source.

DS2 measures each operator's *true processing rate*: the records it processes per unit of *useful* time
(busy time), i.e. what one instance could process if it never waited. The optimal parallelism is then

    n* = ceil( over_provisioning · target_rate / true_rate_per_replica )

with target_rate the source's rate (here the input rate of the period) and true_rate_per_replica =
throughput / busy / n. DS2 assumes linear scaling, so on a sub-linear operator (beta < 1) or with a latency
penalty it converges in a few steps rather than one. Latency-unaware: nodes are drawn at random (seeded).

Options: `over_provisioning` (1.0 = DS2 as published; > 1 adds head-room).
"""

from __future__ import annotations

import math
from typing import ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register
from gesscale.policies.signals import true_rate


def ds2_parallelism(target_rate: float, true_rate_per_replica: float, over_provisioning: float = 1.0) -> int:
    """DS2's optimal instance count: ceil(over_provisioning · target / true rate per instance), at least 1."""
    if true_rate_per_replica <= 0:
        raise ValueError("true processing rate must be positive")
    return max(1, math.ceil(over_provisioning * target_rate / true_rate_per_replica - 1e-9))


@register
class DS2Policy(Policy):
    """DS2: parallelism = input rate / true processing rate per replica (busy-time based)."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "over_provisioning": "Factor on DS2's instance count ceil(factor * input / true rate per replica).",
    }
    # (lo, hi, lo_open) of an option whose range is not the default (counts >= 1, numbers >= 0).
    option_bounds: ClassVar[dict[str, tuple]] = {
        "over_provisioning": (0.0, None, True),
    }

    id = "ds2"
    summary = "DS2 (OSDI'18): n = ceil(input rate / true processing rate per replica from busy time), random node"
    latency_aware = False

    def __init__(self, over_provisioning: float = 1.0) -> None:
        self.over_provisioning = over_provisioning

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One DS2 evaluation (see the module docstring)."""
        n = obs.n
        if ctx.in_warmup:
            return Decision(n, "warm-up")
        rate = true_rate(obs)
        if rate is None:
            return Decision(n, "no busy-time metric")
        per_replica = rate / n
        target = ctx.clamp(ds2_parallelism(obs.input_rate, per_replica, self.over_provisioning))
        return Decision(target, f"input {obs.input_rate:.0f}/s at {per_replica:.0f}/s per replica → {target}")
