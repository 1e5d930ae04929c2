"""Figures of the comparison matrix: heatmaps across scenarios and replicas over time per scenario (each as PNG
at 300 dpi, SVG and PDF, in the style of `gesscale.figures`).

- `heatmap`: policies × scenarios, one colour per cell with its value written in; used for the normalised
  cost (cost / the `ideal` oracle's cost in that scenario, or / the cheapest policy without an oracle) and for
  the excess time.
- `regret_boxplots`: per policy, the distribution over scenarios of cost / optimal and of excess − optimal's
  (one point per scenario; failing scenarios drawn as red crosses and left out of the boxes).
- `replicas_plot`: one small panel per policy showing its replicas over time (first seed) against the ideal
  replica count (demand), so under- and over-provisioning of every policy can be read on one page.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gesscale.figures import ROLE


def _pyplot():  # type: ignore[no-untyped-def]
    from gesscale.figures import pyplot

    return pyplot()


def _save(plt: Any, fig: Any, path: str | Path, tight: bool = True) -> Path:
    """Lay out (unless the figure has its own layout engine), write PNG, SVG and PDF (creating the folder), free
    the figure; return the PNG's path."""
    from gesscale.figures import save

    if tight:
        fig.tight_layout()
    return save(fig, path)


def normalised_cost(matrix: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """scenario → policy → cost / reference cost (the `ideal` policy's, else the cheapest policy's)."""
    out: dict[str, dict[str, float]] = {}
    for sc, per in matrix.items():
        ref = per["ideal"]["cost"] if "ideal" in per else min(m["cost"] for m in per.values())
        out[sc] = {p: (m["cost"] / ref if ref > 0 else math.nan) for p, m in per.items()}
    return out


def printed_values(grid: np.ndarray, fmt: str) -> np.ndarray:
    """The values as the cells print them (`fmt` applied, then read back), so that equal text gets equal colour."""
    out = np.full(grid.shape, math.nan)
    for idx, v in np.ndenumerate(grid):
        if np.isfinite(v):
            out[idx] = float(fmt.format(v).replace(",", ""))
    return out


def heatmap(
    values: Mapping[str, Mapping[str, float]],
    title: str,
    path: str | Path,
    fmt: str = "{:.2f}",
    cmap: str = "magma_r",
    failed: Collection[tuple[str, str]] = (),
    references: Collection[str] = (),
    caption: str = "",
    unit: str = "",
) -> Path:
    """Write a policies × scenarios heatmap of `values` (scenario → policy → number).

    The colour of a cell is that of its printed value (equal text, equal colour) on a linear scale from the
    smallest to the largest value of the cells that did not fail; nothing is clipped, and no power law stretches
    small values (0.004 next to 0.000 looks as close as it is). A failing cell (`failed`: (scenario, policy)
    whose backlog was never drained) is grey, hatched and marked FAIL: its low cost is not a result, so it takes
    no colour. Reference policies (`references`) are labelled as such. `unit` labels the colour bar; `caption`
    (e.g. the workloads' provenance) goes below.
    """
    plt = _pyplot()
    scenarios = list(values)
    policies = sorted({p for per in values.values() for p in per})
    raw = np.array([[values[sc].get(p, math.nan) for sc in scenarios] for p in policies], dtype=float)
    shown = printed_values(raw, fmt)
    bad = np.array([[(sc, p) in failed for sc in scenarios] for p in policies], dtype=bool)
    grid = np.where(bad, math.nan, shown)
    width = max(6.0, 3.2 + 1.1 * len(scenarios))
    cap_lines = textwrap.wrap(caption, int(width * 16)) if caption else []
    fig, ax = plt.subplots(figsize=(width, 1.9 + 0.3 * len(policies) + 0.13 * len(cap_lines)),
                           layout="constrained")
    finite = grid[np.isfinite(grid)]
    vmin = float(finite.min()) if finite.size else 0.0
    vmax = float(finite.max()) if finite.size else 1.0
    if vmax <= vmin:
        vmax = vmin + 1.0
    colour_map = plt.get_cmap(cmap).with_extremes(bad="#d9d9d9")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=colour_map, aspect="auto", vmin=vmin, vmax=vmax)
    ax.grid(False)
    ax.set_xticks(range(len(scenarios)), labels=scenarios, rotation=30 if len(scenarios) > 1 else 0,
                  ha="right" if len(scenarios) > 1 else "center")
    ax.set_yticks(range(len(policies)), labels=[f"{p} (reference)" if p in references else p for p in policies])
    ax.set_xlabel("scenario")
    ax.set_ylabel("policy")
    for i in range(len(policies)):
        for j in range(len(scenarios)):
            v = raw[i, j]
            if not np.isfinite(v):
                continue
            if bad[i, j]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="grey",
                                           lw=0))
                ax.text(j, i, f"{fmt.format(v)} FAIL", ha="center", va="center", fontsize=6,
                        color=ROLE["fail"], fontweight="bold")
                continue
            dark = float(im.norm(grid[i, j])) > 0.6
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=6, color="white" if dark else "black")
    ax.set_title(title)
    bar = fig.colorbar(im, ax=ax, shrink=0.9, pad=0.02)
    if unit:
        bar.set_label(unit)
    if cap_lines:
        fig.supxlabel("\n".join(cap_lines), fontsize=6)
    return _save(plt, fig, path, tight=False)


def regret_boxplots(regret_matrix: Mapping[str, Mapping[str, Mapping[str, Any]]], path: str | Path) -> Path:
    """Two panels of box plots over scenarios (scenario → policy → `gesscale.regret` row): cost / optimal and
    excess − optimal's, per policy; a scenario where the policy failed is a cross outside the box. The legend
    sits below the panels, never over a box; the title is wrapped to the figure's width."""
    plt = _pyplot()
    policies = sorted({p for per in regret_matrix.values() for p in per})
    width = max(6.0, 1.6 + 0.42 * len(policies))
    fig, axes = plt.subplots(2, 1, figsize=(width, 6.4), sharex=True, layout="constrained")
    failed_any = False
    for ax, key, label in ((axes[0], "cost_vs_optimal", "cost / optimal's (ratio)"),
                           (axes[1], "excess_vs_optimal", "excess time − optimal's\n(fraction of input)")):
        ok, bad = [], []
        for p in policies:
            rows = [per[p] for per in regret_matrix.values() if p in per and per[p].get(key) is not None]
            ok.append([float(r[key]) for r in rows if not r.get("failed_seeds")])
            bad.append([float(r[key]) for r in rows if r.get("failed_seeds")])
        ax.boxplot([v if v else [math.nan] for v in ok], positions=range(len(policies)), widths=0.6,
                   showfliers=True)
        for i, values in enumerate(bad):
            if values:
                failed_any = True
                ax.scatter([i] * len(values), values, marker="x", color=ROLE["fail"], zorder=3,
                           label="FAIL (backlog never drained)")
        ax.set_ylabel(label)
        ax.grid(axis="x", visible=False)
    axes[0].axhline(1.0, color=ROLE["reference"], lw=0.8)
    fig.suptitle(textwrap.fill(f"regret over {len(regret_matrix)} scenario(s) (medians over seeds)",
                               int(width * 11)))
    axes[1].set_xticks(range(len(policies)), labels=policies, rotation=90)  # upright: 16 names never touch
    axes[1].set_xlabel("policy")
    if failed_any:
        handles, labels = [], []
        for ax in axes:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(handles, labels, loc="outside lower center")
    return _save(plt, fig, path, tight=False)


def replicas_plot(
    scenario: str,
    series: Mapping[str, tuple[Sequence[int], Sequence[int]]],
    period_s: float,
    path: str | Path,
    caption: str = "",
) -> Path:
    """One panel per policy: replicas in use (first seed) and the ideal replica count, over time in minutes;
    `caption` (the workload's provenance) below. The lowest panel of every column carries the time axis, also
    when the row below it is not full."""
    from gesscale.figures import policy_style

    plt = _pyplot()
    policies = sorted(series)
    cols = 4 if len(policies) > 6 else max(1, min(3, len(policies)))
    rows = math.ceil(len(policies) / cols)
    cap_lines = textwrap.wrap(f"Workload: {caption}", int(3.2 * cols * 16)) if caption else []
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 1.7 * rows + 0.9 + 0.13 * len(cap_lines)),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    for ax, pid in zip(axes.flat, policies, strict=False):
        supply, demand = series[pid]
        t_s = np.arange(len(supply)) * period_s / 60.0
        t_d = np.arange(len(demand)) * period_s / 60.0
        ax.step(t_d, demand, where="post", color=ROLE["ideal"], lw=0.8, label="ideal")
        look = policy_style(pid)
        ax.step(t_s, supply, where="post", color=look["color"], linestyle=look["linestyle"], lw=1.2,
                label="replicas")
        ax.set_title(pid)
    for ax in list(axes.flat)[len(policies):]:
        ax.axis("off")
    for c in range(cols):
        used = [axes[r][c] for r in range(rows) if r * cols + c < len(policies)]
        if used:
            used[-1].set_xlabel("time (min)")
            used[-1].xaxis.set_tick_params(labelbottom=True)
    for row in axes:
        row[0].set_ylabel("replicas")
    # the key in the title: a legend over a panel would hide a curve, and it would show one policy's colour
    fig.suptitle(f"{scenario}: replicas in use over time (first seed; one colour per policy) against the ideal "
                 "count (black)")
    if cap_lines:
        fig.supxlabel("\n".join(cap_lines), fontsize=6)
    return _save(plt, fig, path, tight=False)
