"""The live run's report: model vs measured points, the reconfigurations, the timeline PNG.

The run's simulated twin (the scenario the simulator replays this run's conditions with, built from what the run
measured and never from its decisions) is `gesscale.twin.build_twin`; its fidelity, `gesscale.fidelity`.
"""

from __future__ import annotations

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
            "gamma": model.gamma_ if fitted else None, "delta": model.delta_ if fitted else None,
            "form": model.form_, "form_requested": model.form, "form_reason": model.form_reason_,
            "loo": model.loo_errors(), "measurements": points}


def reconfiguration_rows(reconfigs: list[dict[str, Any]], lmap: LatencyMap, seed: int,
                         strategy: str) -> list[dict[str, Any]]:
    """The report's reconfigurations. A scale-up also gets `random_nd_max_ms`: the median ND_max of seeded random
    placements of the same size among the testbed's nodes (`lmap`), what a latency-unaware choice would have had
    (gesscale.random_placement), beside the `nd_max_ms` of the placement chosen."""
    from gesscale.random_placement import median_random_nd_max

    return [
        {"kind": r["kind"], "nodes": r["nodes"], "nd_max_ms": r["nd_max_ms"], "pause_s": r["pause_s"],
         "added": r.get("added", []), "removed": r.get("removed", []), "time_s": r.get("time_s"),
         "started_s": r.get("started_s"), "effective_s": r.get("effective_s"),
         "reason": r.get("reason", ""), "strategy": r.get("strategy", strategy),
         **({"random_nd_max_ms": round(median_random_nd_max(lmap, lmap.names, len(r["nodes"]), seed), 3)}
            if r["kind"] == "up" else {})}
        for r in reconfigs
    ]


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
    from gesscale.model import FORMS

    form = FORMS[model.get("form") or "paper"]
    latency = model.get("delta") if form.latency_param == "delta" else model["gamma"]
    label += f" ({form.name}: {form.formula})"
    return ns, [form.mst(model["alpha"], model["beta"], latency or 0.0, n, nd)
                for n, nd in zip(ns, nds, strict=True)], label


def plot_timeline(steps: list[StepRecord], reconfigs: list[dict[str, Any]], model: dict[str, Any] | None,
                  path: Path, title: str, lmap: LatencyMap | None = None,
                  period_latency: list[dict[str, Any]] | None = None, latency: dict[str, Any] | None = None) -> Path:
    """PNG: input vs throughput and backlog; replicas with each reconfiguration (shaded from the decision until
    a batch of the new configuration completed, labelled with the measured pause); with `period_latency` the
    records' end-to-end latency per control period (p50, p95, p99, max of the records that arrived in it) against
    the run's SLO; the model vs its measurements.
    """
    from gesscale.figures import pyplot, save

    plt = pyplot()  # the shared style; written as PNG (300 dpi), SVG and PDF
    path.parent.mkdir(parents=True, exist_ok=True)
    t = [s.observation.time_s for s in steps]
    rows = 4 if period_latency else 3
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3 * rows))
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
    if period_latency:
        _plot_latency(axes[2], t[: len(period_latency)], period_latency, latency or {})
        axes[2].set_xlim(axes[0].get_xlim())  # the same time axis as the panels above
    ax = axes[-1]
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
    return save(fig, path)


def _plot_latency(ax: Any, t: list[float], periods: list[dict[str, Any]], run: dict[str, Any]) -> None:
    """Per control period, p50/p95/p99/max of the latency of the records that arrived in it (log scale), the
    run's SLO as a line, the run's figures in the title."""
    import matplotlib
    import matplotlib.ticker

    styles = (("p50_s", "p50", "tab:green"), ("p95_s", "p95", "tab:orange"), ("p99_s", "p99", "tab:red"),
              ("max_s", "max", "grey"))
    for key, label, color in styles:
        pts = [(x, p[key]) for x, p in zip(t, periods, strict=False) if p.get(key) is not None]
        if pts:
            ax.plot([x for x, _ in pts], [max(y, 1e-3) for _, y in pts], ".-", label=label, color=color, ms=4)
    if run.get("slo_s") is not None:
        ax.axhline(run["slo_s"], color="black", lw=0.8, ls="--", label=f"SLO {run['slo_s']:g} s")
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_ylabel("record latency (s)")
    ax.set_xlabel("time since the testbed started (s): end of the period the records arrived in")
    if run.get("records"):
        ax.set_title(f"end-to-end latency ({run.get('basis', '')}), by period of arrival; run: p50 "
                     f"{run.get('p50_s')} s, p95 {run.get('p95_s')} s, p99 {run.get('p99_s')} s, max "
                     f"{run.get('max_s')} s, {100 * run.get('over_slo_share', 0):.1f} % above the SLO",
                     fontsize=8)
    ax.legend(loc="upper left", fontsize=7)
