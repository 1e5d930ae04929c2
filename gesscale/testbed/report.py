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

from gesscale.latency_map import LatencyMap
from gesscale.mape import StepRecord


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


def relative_noise(model: dict[str, Any] | None, floor: float = 0.01, ceiling: float = 0.9) -> float:
    """Relative standard deviation of the measurements around the model, within [`floor`, `ceiling`] (a
    scenario's noise must be below 1: a wildly scattered run is still simulated, at the ceiling)."""
    if not model or not model["fitted"]:
        return 0.05
    rel = [(p["mst"] - p["predicted"]) / p["predicted"] for p in model["measurements"] if p["predicted"]]
    return min(ceiling, max(floor, statistics.pstdev(rel))) if len(rel) >= 2 else 0.05


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


def model_curve(model: dict[str, Any], lmap: LatencyMap | None, n_max: int) -> tuple[list[int], list[float], str]:
    """The fitted model's MST for n = 1..n_max at the placement the controller would choose (min ND_max), or at
    the largest measured ND_max when no map is given; returns (n, MST, label)."""
    ns = list(range(1, n_max + 1))
    if lmap is not None:
        from gesscale import placement

        nds = placement.best_nd_max_by_size(lmap.placement_graph(), lmap.names, n_max)[1:]
        label = "model at the min-ND_max placement"
    else:
        nd = max(m["nd_max_ms"] for m in model["measurements"])
        nds = [nd] * len(ns)
        label = f"model at ND_max={nd:.0f} ms"
    ns = ns[: len(nds)]
    return ns, [model["alpha"] * n ** model["beta"] - model["gamma"] * nd for n, nd in zip(ns, nds, strict=True)], label


def plot_timeline(steps: list[StepRecord], reconfigs: list[dict[str, Any]], model: dict[str, Any] | None,
                  path: Path, title: str, lmap: LatencyMap | None = None) -> Path:
    """PNG: input vs throughput and backlog; replicas with each reconfiguration (shaded from the decision until
    a batch of the new configuration completed, labelled with the measured pause); the model vs its measurements.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    t = [s.observation.time_s for s in steps]
    fig, axes = plt.subplots(3, 1, figsize=(10, 9))
    ax = axes[0]
    ax.plot(t, [s.observation.input_rate for s in steps], ".-", label="input rate", color="tab:blue")
    ax.plot(t, [s.observation.throughput for s in steps], ".-", label="throughput", color="tab:orange")
    ax.set_ylabel("records/s (per control period)")
    ax.set_title(title)
    ax2 = ax.twinx()
    ax2.fill_between(t, [s.observation.backlog for s in steps], color="tab:red", alpha=0.15, label="backlog")
    ax2.set_ylabel("backlog (records)", color="tab:red")
    ax = axes[1]
    ax.step(t, [s.observation.n for s in steps], where="post", color="tab:green", marker=".",
            label="replicas observed")
    ax.set_ylim(0, max([s.observation.n for s in steps] + [len(r["nodes"]) for r in reconfigs] + [1]) + 1)
    for r in reconfigs:
        at = r.get("started_s", r.get("time_s", 0.0))
        until = r.get("effective_s") or at
        for a in axes[:2]:
            a.axvspan(at, max(until, at + 0.5), color="grey", alpha=0.2, lw=0)
        ax.annotate(f"{r['kind']} -> {len(r['nodes'])} ({','.join(r.get('added') or r.get('removed') or [])}), "
                    f"pause {r['pause_s']:.0f} s", (at, 0.97), xycoords=("data", "axes fraction"), fontsize=7,
                    rotation=90, va="top", ha="right")
    axes[0].legend(loc="upper left")
    ax.set_ylabel("replicas")
    ax.set_xlabel("time since the testbed started (s); grey: reconfiguring, until a batch of the new "
                  "configuration completed")
    ax.legend(loc="lower right")
    ax = axes[2]
    if model and model["measurements"]:
        ms = model["measurements"]
        ax.scatter([m["n"] for m in ms], [m["mst"] for m in ms], label="measured MST", color="tab:purple")
        if model["fitted"]:
            n_max = max(m["n"] for m in ms) + 1
            if lmap is not None:
                n_max = min(n_max, len(lmap.names))
            ns, pred, label = model_curve(model, lmap, n_max)
            ax.plot(ns, pred, "o-", label=label, color="black", ms=3)
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
