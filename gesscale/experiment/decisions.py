"""The decision log of a run (what each period decided and why, and the model's predicted MST against the one
observed) and its figure; shared by simulated (`bundle`) and live (`live`) experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gesscale.mape import StepRecord
from gesscale.model import PerformanceModel

# `network`: the changes the controller's measured view of the network logged at the period's end, before it decided
# (`latency_source` measured or both: "pi03-pi04 6.9 -> 66.9 ms; ..."; empty otherwise).
DECISION_COLUMNS = ("policy", "seed", "t_s", "replicas", "nd_max_ms", "throughput", "saturated", "decision",
                    "applied", "reason", "predicted_mst", "observed_mst", "error_pct", "model_form", "model_loo_rms",
                    "network")


class DecisionLog:
    """Collects the decision log of one run through `run_once(on_step=...)`."""

    def __init__(self, policy: str, seed: int, initial: PerformanceModel | None) -> None:
        self.policy, self.seed = policy, seed
        self.rows: list[dict[str, Any]] = []
        self._before = self._snapshot(initial)
        # each form's leave-one-out RMS error as the model stood before the period (`auto` models only)
        self._loo = "" if initial is None else "; ".join(f"{f} {100 * r:.1f}%" for f, r in initial.loo_rms().items())

    @staticmethod
    def _snapshot(model: PerformanceModel | None) -> PerformanceModel | None:
        if model is None or not model.is_fitted:
            return None
        return model.frozen()  # the chosen form and its fitted values (gesscale.model)

    def __call__(self, record: StepRecord, policy: Any) -> None:
        """Record one period (called by the control loop after the policy decided)."""
        o, d = record.observation, record.decision
        nd = o.nd_max_ms if getattr(policy, "uses_latency_in_model", True) else 0.0
        saturated = o.bp_upstream > 0.5 and o.paused_s == 0
        predicted = self._before.predict(o.n, nd) if self._before is not None else None
        observed = o.throughput if saturated else None
        error = (100.0 * (predicted - observed) / observed
                 if predicted is not None and observed is not None and observed > 0 else None)
        self.rows.append({
            "policy": self.policy, "seed": self.seed, "t_s": o.time_s, "replicas": o.n,
            "nd_max_ms": round(o.nd_max_ms, 2), "throughput": round(o.throughput, 2), "saturated": int(saturated),
            "decision": d.target, "applied": int(record.applied), "reason": d.reason,
            "predicted_mst": "" if predicted is None else round(predicted, 2),
            "observed_mst": "" if observed is None else round(observed, 2),
            "error_pct": "" if error is None else round(error, 2),
            "model_form": "" if self._before is None else self._before.form_,
            "model_loo_rms": self._loo,
            "network": "; ".join(str(c) for c in record.network_changes),
        })
        model = getattr(policy, "model", None)
        self._before = self._snapshot(model)
        loo = getattr(policy, "loo_rms", None) or (model.loo_rms() if model is not None else {})
        self._loo = "; ".join(f"{form} {100 * rms:.1f}%" for form, rms in loo.items())


def model_figure(decisions: list[dict[str, Any]], path: Path, caption: str) -> Path | None:
    """Predicted against observed MST over time, per model-based policy (first seed); None without any."""
    pairs: dict[str, list[tuple[float, float, float]]] = {}
    first_seed: dict[str, int] = {}
    for row in decisions:
        first_seed.setdefault(row["policy"], row["seed"])
        if row["seed"] == first_seed[row["policy"]] and row["predicted_mst"] != "" and row["observed_mst"] != "":
            pairs.setdefault(row["policy"], []).append((row["t_s"], row["predicted_mst"], row["observed_mst"]))
    if not pairs:
        return None
    import textwrap

    from gesscale.figures import ROLE, pyplot, save

    plt = pyplot()
    fig, axes = plt.subplots(1, len(pairs), figsize=(max(6.0, 4.2 * len(pairs)), 3.6), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (pid, pts) in zip(axes[0], sorted(pairs.items()), strict=False):
        t = [p[0] / 60.0 for p in pts]
        ax.scatter(t, [p[2] for p in pts], s=8, color=ROLE["observed"], label="observed MST (saturated periods)")
        ax.scatter(t, [p[1] for p in pts], s=8, marker="x", color=ROLE["predicted"],
                   label="model's prediction before")
        ax.set_title(pid, fontsize=9)
        ax.set_xlabel("time (min)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("MST (records/s)")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("performance model: predicted against observed MST (first seed)", fontsize=10)
    fig.supxlabel(textwrap.fill(f"Workload: {caption}", 110), fontsize=7)
    return save(fig, path)
