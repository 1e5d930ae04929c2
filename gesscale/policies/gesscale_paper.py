"""Gesscale (Arkian et al., ICCCN 2021, Algorithms 1-4) and its latency-unaware model baseline.

- Algorithm 1 (monitor/analyse): the operator is the root of back pressure when its upstream is back-pressured
  (BP_{i-1} > 0.5) and it is not itself (BP_i <= 0.5). Its throughput CT is then a measurement of its MST at
  (n, ND_max).
- Algorithm 2 (calibrate): the measurement is added to the performance model (`gesscale.model`).
- Algorithm 3 (scale up): add one replica on the node that minimises ND_max (`gesscale.placement`) — unless
  the backlog shrank over the period: then the operator is saturated only because it is catching up with the
  backlog a reconfiguration pause left (MST > input), which is a measurement but not a reason to grow.
- Algorithm 4 (scale down): with MST_n the model's prediction for the current configuration,
  DT = 100 (MST_n - CT) / MST_n. When DT >= Trshld_DT, remove replicas — the one with the greatest latency
  first — while the model predicts that the remaining ones still sustain the input rate (with a margin);
  possibly several in one step.
- No scale-down while a backlog of more than a tenth of a period's input waits and is not shrinking: the
  throughput then says nothing about what fewer replicas could do (our guard; the paper is silent on it).
- No decision during the warm-up after a reconfiguration; n_min <= n <= n_max.

The model's form is the controller's `model_form` (`gesscale.model.FORMS`; `auto` chooses it by leave-one-out
error once the data can tell), set on the model before every decision.

`mdl-nlunaware` is the paper's "simpler performance model" baseline: the same algorithms with MST = alpha n^beta
(latency ignored: every measurement and prediction uses ND_max = 0) and random node choice.
"""

from __future__ import annotations

from typing import Any

from gesscale import placement
from gesscale.model import Measurement, PerformanceModel
from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext, register


def is_root_of_back_pressure(bp_upstream: float, bp_operator: float, threshold: float = 0.5) -> bool:
    """Algorithm 1's test: upstream back-pressured and the operator itself not."""
    return bp_upstream > threshold and bp_operator <= threshold


@register
class GesscalePolicy(Policy):
    """Gesscale: model-based, latency-aware scale-up by one and model-based multi-replica scale-down."""

    id = "gesscale"
    summary = "Gesscale (ICCCN'21): root-of-back-pressure +1, model-based scale-down, min-ND_max placement"
    latency_aware = True
    uses_latency_in_model = True

    def __init__(self, model: PerformanceModel | None = None) -> None:
        self.model = model if model is not None else PerformanceModel()

    def _nd(self, nd_max_ms: float) -> float:
        return nd_max_ms if self.uses_latency_in_model else 0.0

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """One MAPE decision (see the module docstring)."""
        self.model.use_form(ctx.config.model_form)  # the controller's `model_form` (auto: chosen by the data)
        self.model.use_latency(ctx.config.model_latency)  # checked when the loop started (`ControlLoop`)
        n = obs.n
        if ctx.in_warmup:
            return Decision(n, "warm-up")
        if is_root_of_back_pressure(obs.bp_upstream, obs.bp_operator, ctx.config.bp_high):
            if obs.backlog_growth < 0 and obs.backlog <= 0:
                # Caught up within the period: for part of it there was nothing left to process, so CT is bounded
                # by the input, not by the capacity, and is no measurement of MST.
                return Decision(n, f"caught up within the period at {obs.throughput:.0f}/s: no MST measurement")
            self.model.add(Measurement(n, self._nd(obs.nd_max_ms), obs.throughput))
            if obs.backlog_growth < 0:
                # Saturated but the backlog shrinks: MST exceeds the input and the operator is catching up with
                # what a pause left. The throughput is a valid MST measurement; more replicas are not needed.
                return Decision(n, f"catching up at MST({n})≈{obs.throughput:.0f} > input {obs.input_rate:.0f}")
            if n < ctx.n_max:
                reason = f"root of back pressure (BP={obs.bp_upstream:.2f}), MST({n})≈{obs.throughput:.0f}"
                return Decision(n + 1, reason)
            return Decision(n, "back-pressured but at n_max")
        return self._scale_down(obs, ctx)

    def _scale_down(self, obs: Observation, ctx: PolicyContext) -> Decision:
        n = obs.n
        if not self.model.is_fitted or n <= ctx.n_min:
            return Decision(n, "steady")
        mst_n = self.model.predict(n, self._nd(obs.nd_max_ms))
        if mst_n <= 0:
            return Decision(n, "steady")
        if obs.backlog > 0.1 * obs.input_rate * obs.period_s and obs.backlog_growth >= 0:
            # Records wait and are not being caught up (e.g. the period was a pause): CT says nothing about what
            # fewer replicas could do, and removing one would only add a pause to the wait.
            return Decision(n, f"backlog of {obs.backlog:.0f} waiting: no scale-down")
        dt = 100.0 * (mst_n - obs.throughput) / mst_n
        if dt < ctx.config.dt_threshold_pct:
            return Decision(n, f"DT={dt:.0f}% below threshold")
        need = max(obs.input_rate, obs.throughput) * (1.0 + ctx.config.scale_down_margin)
        current = list(obs.replicas)
        removed: list[str] = []
        while len(current) > ctx.n_min:
            victim = (
                placement.choose_node_to_remove(ctx.graph, current)
                if self.latency_aware
                else ctx.rng.choice(sorted(current))
            )
            rest = [v for v in current if v != victim]
            if self.model.predict(len(rest), self._nd(placement.nd_max(ctx.graph, rest))) < need:
                break
            current, removed = rest, removed + [victim]  # type: ignore[list-item]
        if not removed:
            return Decision(n, f"DT={dt:.0f}% but fewer replicas would not sustain the input")
        return Decision(n - len(removed), f"DT={dt:.0f}%: model says {len(current)} sustain {need:.0f}/s",
                        remove=tuple(removed))

    def state_dict(self) -> dict[str, Any]:
        """The performance model with its measurements."""
        return {"model": self.model.to_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume with a saved model."""
        if "model" in state:
            self.model = PerformanceModel.from_dict(state["model"])

    def model_summary(self) -> dict[str, Any]:
        """Fitted parameters and measurement count."""
        return {
            "alpha": self.model.alpha_,
            "beta": self.model.beta_,
            "gamma": self.model.gamma_,
            "delta": self.model.delta_,
            "form": self.model.form_,
            "loo_rms": self.model.loo_rms(),
            "measurements": len(self.model.measurements_),
        }


@register
class ModelLatencyUnawarePolicy(GesscalePolicy):
    """The paper's model baseline: MST = alpha n^beta without the latency term, random node choice."""

    id = "mdl-nlunaware"
    summary = "model baseline (ICCCN'21): Gesscale's algorithms with MST = alpha n^beta, random node choice"
    latency_aware = False
    uses_latency_in_model = False
