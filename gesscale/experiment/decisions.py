"""The decision log of a run (what each period decided and why, and the model's predicted MST against the one
observed) and its figure; shared by simulated (`bundle`) and live (`live`) experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gesscale.mape import StepRecord
from gesscale.model import PerformanceModel

DECISION_COLUMNS = ("policy", "seed", "t_s", "replicas", "nd_max_ms", "throughput", "saturated", "decision",
                    "applied", "reason", "predicted_mst", "observed_mst", "error_pct")


class DecisionLog:
    """Collects the decision log of one run through `run_once(on_step=...)`."""

    def __init__(self, policy: str, seed: int, initial: PerformanceModel | None) -> None:
        self.policy, self.seed = policy, seed
        self.rows: list[dict[str, Any]] = []
        self._before = self._snapshot(initial)

    @staticmethod
    def _snapshot(model: PerformanceModel | None) -> PerformanceModel | None:
        if model is None or not model.is_fitted:
            return None
        return PerformanceModel.from_dict({"alpha": model.alpha_, "beta": model.beta_, "gamma": model.gamma_,
                                           "n_params": model.n_params_})

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
        })
        self._before = self._snapshot(getattr(policy, "model", None))



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

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(pairs), figsize=(max(6.0, 4.2 * len(pairs)), 3.6), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (pid, pts) in zip(axes[0], sorted(pairs.items()), strict=False):
        t = [p[0] / 60.0 for p in pts]
        ax.scatter(t, [p[2] for p in pts], s=8, color="tab:orange", label="observed MST (saturated periods)")
        ax.scatter(t, [p[1] for p in pts], s=8, marker="x", color="tab:blue", label="model's prediction before")
        ax.set_title(pid, fontsize=9)
        ax.set_xlabel("time (min)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("MST (records/s)")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("performance model: predicted against observed MST (first seed)", fontsize=10)
    fig.supxlabel(textwrap.fill(f"Workload: {caption}", 110), fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
