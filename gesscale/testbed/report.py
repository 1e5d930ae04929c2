"""The live run's report: model vs measured points, timeline PNG, and the scenario calibrated from the run.

The calibrated scenario carries the fitted model as ground truth (α, β, γ), the relative spread of the
measurements around it as noise, the mean measured pause as the reconfiguration pause, the same latency map,
control period, warm-up and taxi workload as the live run — so the simulator replays this run's conditions
and compares the policies on them in seconds.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from gesscale.mape import StepRecord
from netem.latency_map import LatencyMap


def model_points(policy: Any) -> dict[str, Any] | None:
    """The policy's fitted parameters and each MST measurement with the model's prediction at that point."""
    model = getattr(policy, "model", None)
    if model is None:
        return None
    fitted = model.is_fitted
    points = []
    for m in model.measurements_:
        d = m.to_dict()
        d["predicted"] = round(float(model.predict(m.n, m.nd_max_ms)), 2) if fitted else None
        points.append(d)
    return {"fitted": fitted, "alpha": model.alpha_ if fitted else None, "beta": model.beta_ if fitted else None,
            "gamma": model.gamma_ if fitted else None, "measurements": points}


def relative_noise(model: dict[str, Any] | None, floor: float = 0.01) -> float:
    """Relative standard deviation of the measurements around the model (at least `floor`)."""
    if not model or not model["fitted"]:
        return 0.05
    rel = [(p["mst"] - p["predicted"]) / p["predicted"] for p in model["measurements"] if p["predicted"]]
    return max(floor, statistics.pstdev(rel)) if len(rel) >= 2 else 0.05


def calibrated_scenario(model: dict[str, Any] | None, steps: list[StepRecord], pauses: list[float],
                        lmap: LatencyMap, workload: dict[str, Any], period_s: float, warmup_s: float,
                        max_replicas: int) -> dict[str, Any]:
    """A scenario dict (for `scenario_from_dict`) with this run's measured operator, pauses and input."""
    if model and model["fitted"]:
        alpha, beta, gamma = model["alpha"], model["beta"], model["gamma"]
    else:  # no back-pressured period: the best throughput per replica seen is a lower bound of the MST
        best = max((s.observation.throughput / max(1, s.observation.n) for s in steps), default=100.0)
        alpha, beta, gamma = max(best, 1.0), 1.0, 0.0
    return {
        "name": "demo-calibrated",
        "control_period_s": period_s,
        "warmup_s": warmup_s,
        "cluster": {"latency_map": lmap.to_dict(), "min_replicas": 1, "max_replicas": max_replicas},
        "operator": {"alpha": float(alpha), "beta": float(min(1.5, max(beta, 1e-3))), "gamma": float(gamma),
                     "noise": relative_noise(model),
                     "reconfig_pause_s": float(statistics.mean(pauses)) if pauses else 0.0,
                     "initial_replicas": 1},
        "workload": dict(workload),
        "seed": 1,
    }


def plot_timeline(steps: list[StepRecord], reconfigs: list[dict[str, Any]], model: dict[str, Any] | None,
                  path: Path, title: str) -> Path:
    """PNG: input vs throughput and backlog; replicas with each reconfiguration; the model vs its measurements."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    t = [s.observation.time_s for s in steps]
    fig, axes = plt.subplots(3, 1, figsize=(10, 9))
    ax = axes[0]
    ax.plot(t, [s.observation.input_rate for s in steps], label="input rate", color="tab:blue")
    ax.plot(t, [s.observation.throughput for s in steps], label="throughput", color="tab:orange")
    ax.set_ylabel("records/s")
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax2 = ax.twinx()
    ax2.fill_between(t, [s.observation.backlog for s in steps], color="tab:red", alpha=0.15)
    ax2.set_ylabel("backlog (records)", color="tab:red")
    ax = axes[1]
    ax.step(t, [s.observation.n for s in steps], where="post", color="tab:green", label="replicas observed")
    for r in reconfigs:
        at = r.get("started_s", r.get("time_s", 0.0))
        ax.axvline(at, color="grey", lw=0.8, ls="--")
        ax.annotate(f"{r['kind']} {r['pause_s']:.0f}s", (at, 0.2), fontsize=7, rotation=90)
    ax.set_ylabel("replicas")
    ax.set_xlabel("time since the testbed started (s)")
    ax.legend(loc="upper left")
    ax = axes[2]
    if model and model["measurements"]:
        ms = model["measurements"]
        ax.scatter([m["n"] for m in ms], [m["mst"] for m in ms], label="measured MST", color="tab:purple")
        if model["fitted"]:
            nd = max(m["nd_max_ms"] for m in ms)
            ns = [1 + i * 0.1 for i in range(int(10 * max(m["n"] for m in ms)) + 1)]
            pred = [model["alpha"] * n ** model["beta"] - model["gamma"] * nd for n in ns]
            ax.plot(ns, pred, label=f"model at ND_max={nd:.0f} ms", color="black")
        ax.legend(loc="upper left")
    else:
        ax.text(0.5, 0.5, "no MST measurement (never the root of back pressure)", ha="center",
                transform=ax.transAxes)
    ax.set_xlabel("replicas n")
    ax.set_ylabel("MST (records/s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
