"""Spark Streaming's dynamic allocation (`spark.streaming.dynamicAllocation.*`, Spark's streaming
ExecutorAllocationManager): `spark-dra`.

Every scaling interval (default 60 s) Spark compares the average batch processing time with the batch
interval: ratio = processing time / interval.
- ratio >= scalingUpRatio (0.9): request max(round(ratio), 1) more executors;
- ratio <= scalingDownRatio (0.3): kill one executor.
For a micro-batch engine without a rate limit, a period's batches must process what was pending at its start
plus what arrived during it, at the true processing rate (throughput / busy); so here
ratio = (backlog at start + input rate · period) / (true rate · period). With no busy metric, or nothing
processed at all, the ratio falls back to busy time (or 1 when records are waiting). Latency-unaware.

Options: `up_ratio` (0.9), `down_ratio` (0.3).
"""

from __future__ import annotations

from typing import ClassVar

from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register
from gesscale.policies.signals import backlog_at_start, true_rate, utilisation


def batch_ratio(obs: Observation) -> float | None:
    """Estimated batch processing time / batch interval of the period (see the module docstring)."""
    rate = true_rate(obs)
    if rate is not None:
        return (backlog_at_start(obs) + obs.input_rate * obs.period_s) / (rate * obs.period_s)
    if obs.backlog > 0:
        return 1.0
    return utilisation(obs)


def spark_dra_target(n: int, ratio: float, up_ratio: float = 0.9, down_ratio: float = 0.3) -> int:
    """Spark's rule: +max(round(ratio), 1) at or above `up_ratio`, -1 at or below `down_ratio`."""
    if ratio >= up_ratio:
        return n + max(int(round(ratio)), 1)
    if ratio <= down_ratio:
        return n - 1
    return n


@register
class SparkDRAPolicy(Policy):
    """Spark Streaming dynamic allocation: batch-time / interval ratio >= 0.9 adds, <= 0.3 removes one."""
    # One line per constructor option, for `gesscale options` and --policy-option (gesscale.options).
    option_help: ClassVar[dict[str, str]] = {
        "up_ratio": "Add executors when batch time / interval reaches this.",
        "down_ratio": "Remove one executor when batch time / interval falls to this.",
    }

    id = "spark-dra"
    summary = "Spark Streaming dynamic allocation: batch time/interval >= 0.9 adds round(ratio), <= 0.3 removes 1"
    latency_aware = False

    def __init__(self, up_ratio: float = 0.9, down_ratio: float = 0.3) -> None:
        self.up_ratio = up_ratio
        self.down_ratio = down_ratio

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One scaling interval."""
        n = obs.n
        if ctx.in_warmup:
            return Decision(n, "warm-up")
        ratio = batch_ratio(obs)
        if ratio is None:
            return Decision(n, "no batch-time estimate")
        target = ctx.clamp(spark_dra_target(n, ratio, self.up_ratio, self.down_ratio))
        return Decision(target, f"batch time / interval = {ratio:.2f}")
