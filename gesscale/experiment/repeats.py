"""Repeated live runs: the block plan, the statistics of the runs, their figure and their tables.

- `block_plan`: `repeats` blocks, each running every policy once in an order shuffled from a recorded seed, so that
  drift on a shared machine falls on every policy alike and a pair can be compared block by block;
- `summarise`: per policy and metric the median with its bootstrap interval, and per named pair the block-paired
  difference with its interval and exact sign-flip p-value (`gesscale.stats`, whose docstring states the methods);
- `plot_repeats`: one dot per run, with each policy's median and interval, one panel per metric;
- `stats_tables_html`: the two tables of `report.html`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gesscale.stats import DEFAULT_RESAMPLES, bootstrap_interval, paired_comparison

# The per-run figures compared (those of `live_metrics`; each over the runs that measured it).
STAT_KEYS = ("replica_minutes", "reconfigurations", "avg_replicas", "max_backlog", "lost", "latency_p50_s",
             "latency_p95_s")
STAT_TITLES = {"replica_minutes": "replica-minutes", "reconfigurations": "reconfigurations",
               "avg_replicas": "mean replicas", "max_backlog": "peak backlog (records)", "lost": "records lost",
               "latency_p50_s": "record latency p50 (s)", "latency_p95_s": "record latency p95 (s)"}
METHOD = (f"median of the runs with a 95 % percentile bootstrap interval of the median (B = {DEFAULT_RESAMPLES:,} "
          "resamples, seeded); pairs: mean of the per-block differences with its 95 % percentile bootstrap interval "
          "(blocks resampled) and the exact two-sided sign-flip p-value over all 2^k sign assignments of the k "
          "block differences")


def block_plan(policies: Sequence[str], repeats: int, seed: int) -> list[list[str]]:
    """`repeats` blocks, each a permutation of `policies` drawn from numpy's generator seeded with `seed`."""
    rng = np.random.default_rng(seed)
    return [[policies[i] for i in rng.permutation(len(policies))] for _ in range(repeats)]


def run_id(policy: str, block: int) -> str:
    """The name of a policy's run in a block (1-based): its folder, time series and result file."""
    return f"{policy}-b{block}"


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)


def summarise(runs: Mapping[str, Mapping[str, Any]], compare: Sequence[tuple[str, str]], seed: int = 0,
              resamples: int = DEFAULT_RESAMPLES, keys: Sequence[str] = STAT_KEYS) -> dict[str, Any]:
    """The statistics of a live experiment's runs (each with `policy`, `block` and `live` figures): per policy and
    metric the median and its interval; per pair in `compare` and metric the block-paired comparison."""
    by_policy: dict[str, dict[int, Mapping[str, Any]]] = {}
    for run in runs.values():
        by_policy.setdefault(run["policy"], {})[int(run["block"])] = run["live"]

    def measured(pid: str, key: str) -> dict[int, float]:
        # the blocks whose run measured `key` (a run can leave a figure unknown: fidelity.resources)
        return {b: float(live[key]) for b, live in sorted(by_policy.get(pid, {}).items()) if _numeric(live.get(key))}

    # A figure is compared when every policy measured it in at least one run; each median and each pair then
    # uses the runs (the blocks) that measured it, and says how many.
    metrics = [k for k in keys if by_policy and all(measured(pid, k) for pid in by_policy)]
    per_policy = {pid: {k: bootstrap_interval(list(measured(pid, k).values()), "median", resamples,
                                              seed=seed).to_dict() for k in metrics}
                  for pid in by_policy}
    pairs = []
    for a, b in compare:
        shared = sorted(set(by_policy.get(a, {})) & set(by_policy.get(b, {})))
        if len(shared) < 1:
            continue
        out: dict[str, Any] = {}
        for k in metrics:
            va, vb = measured(a, k), measured(b, k)
            both = [i for i in shared if i in va and i in vb]
            if both:
                out[k] = paired_comparison(a, b, [va[i] for i in both], [vb[i] for i in both], resamples,
                                           seed=seed).to_dict()
        pairs.append({"a": a, "b": b, "blocks": shared, "metrics": out})
    return {"method": METHOD, "seed": seed, "resamples": resamples, "metrics": metrics, "per_policy": per_policy,
            "pairs": pairs}


def plot_repeats(runs: Mapping[str, Mapping[str, Any]], stats: Mapping[str, Any], path: Path,
                 caption: str) -> Path | None:
    """One panel per metric: a dot per run (jittered sideways by block), each policy's median as a bar and its
    interval as a line. None when no metric is shared by every run."""
    metrics = list(stats["metrics"])
    if not metrics:
        return None
    import textwrap

    from gesscale.figures import ROLE, pyplot, save

    plt = pyplot()  # the shared style; written as PNG (300 dpi), SVG and PDF
    policies = list(stats["per_policy"])
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(6.0, 2.9 * len(metrics)), 3.8), squeeze=False,
                             layout="constrained")
    for ax, key in zip(axes[0], metrics, strict=True):
        for x, pid in enumerate(policies):
            mine = sorted((int(r["block"]), float(r["live"][key])) for r in runs.values()
                          if r["policy"] == pid and _numeric(r["live"].get(key)))
            n = max(len(mine), 1)
            offsets = [(i - (n - 1) / 2) * 0.3 / n for i in range(len(mine))]
            ax.scatter([x + o for o in offsets], [v for _, v in mine], s=14, color=ROLE["input"], alpha=0.7,
                       label="one run" if x == 0 else None, zorder=3)
            ci = stats["per_policy"][pid][key]
            ax.plot([x + 0.25, x + 0.25], [ci["lo"], ci["hi"]], color="black", lw=1.5,
                    label="95 % bootstrap interval" if x == 0 else None)
            ax.plot([x + 0.15, x + 0.35], [ci["value"], ci["value"]], color=ROLE["backlog"], lw=2,
                    label="median" if x == 0 else None)
        ax.set_xticks(range(len(policies)), policies, rotation=35, ha="right", fontsize=8)
        ax.set_title(STAT_TITLES.get(key, key), fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle("live runs: one dot per run, median and 95 % bootstrap interval per policy", fontsize=10)
    fig.supxlabel(textwrap.fill(caption, 120), fontsize=7)
    return save(fig, path)


def _f(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def stats_tables_html(stats: Mapping[str, Any]) -> str:
    """The per-policy table (median [interval], n) and the pair table (mean difference [interval], p, blocks)."""
    e = html.escape
    metrics = stats["metrics"]
    if not metrics:
        return "<p>No figure was measured in every run: no statistics.</p>"
    head = "".join(f"<th>{e(STAT_TITLES.get(k, k))}</th>" for k in metrics)
    rows = []
    for pid, per in stats["per_policy"].items():
        n = max(v["n"] for v in per.values())
        cells = "".join(f"<td>{_f(per[k]['value'])} [{_f(per[k]['lo'])}, {_f(per[k]['hi'])}]</td>" for k in metrics)
        rows.append(f"<tr><td>{e(pid)}</td><td>{n}</td>{cells}</tr>")
    out = [f'<table data-table="repeats"><tr><th>policy</th><th>runs</th>{head}</tr>{"".join(rows)}</table>']
    if stats["pairs"]:
        prow = []
        for pair in stats["pairs"]:
            for k in metrics:
                if k not in pair["metrics"]:
                    continue
                m = pair["metrics"][k]
                d = m["mean_difference"]
                prow.append(f"<tr><td>{e(pair['a'])} − {e(pair['b'])}</td><td>{e(STAT_TITLES.get(k, k))}</td>"
                            f"<td>{m['blocks']}</td><td>{_f(d['value'])} [{_f(d['lo'])}, {_f(d['hi'])}]</td>"
                            f"<td>{m['p_value']:.3g}</td></tr>")
        out.append('<table data-table="pairs"><tr><th>pair (a − b)</th><th>metric</th><th>blocks</th>'
                   "<th>mean block difference [95 % interval]</th><th>sign-flip p (two-sided)</th></tr>"
                   + "".join(prow) + "</table>")
    out.append(f"<p>Method: {e(stats['method'])}.</p>")
    return "".join(out)
