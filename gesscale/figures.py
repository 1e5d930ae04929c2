"""The one style of every figure gesscale writes, and how a figure is saved (PNG at 300 dpi, SVG, PDF).

Every plotting function (`gesscale.report`, `gesscale.compare_plots`, the experiment bundle, the testbed's
timeline, `netem.validate`) takes matplotlib from `pyplot()`, which applies `STYLE` (font sizes, the Okabe-Ito
colour-blind-safe palette as the colour cycle, text kept as text in SVG and PDF), draws a policy with
`policy_style(pid)` (one colour, line style and marker per policy, the same in every figure) and writes the
figure with `save(fig, path)`: `path` as PNG at `DPI`, and beside it the same figure as SVG and PDF, so a paper
can take the vector files. `GESSCALE_FIGURE_FORMATS=png` (or `png,svg`) writes fewer: the vector files take about
two thirds of the time a figure costs, which a run that is not for a paper (a test, a quick look) can save.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gesscale.errors import UserError

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision deficiency.
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
}
PALETTE = tuple(OKABE_ITO.values())
# What a colour means wherever it appears (input, throughput, backlog, the ideal count, replicas, ...).
ROLE = {
    "input": OKABE_ITO["blue"], "throughput": OKABE_ITO["orange"], "backlog": OKABE_ITO["vermillion"],
    "ideal": OKABE_ITO["black"], "replicas": OKABE_ITO["bluish green"], "over": OKABE_ITO["sky blue"],
    "under": OKABE_ITO["vermillion"], "fail": OKABE_ITO["vermillion"], "predicted": OKABE_ITO["blue"],
    "observed": OKABE_ITO["orange"], "reference": "#7f7f7f",
}
# A policy's line: the six palette colours that read as lines on white (black is the ideal count's, yellow is too
# faint), times three line styles: 18 distinct looks for the 16 policies.
POLICY_COLOURS = tuple(OKABE_ITO[c] for c in ("blue", "orange", "bluish green", "vermillion", "reddish purple",
                                              "sky blue"))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p", "d", "8", "H", "1")
LINESTYLES = ("-", "--", "-.", ":")
FORMATS = ("png", "svg", "pdf")
FORMATS_ENV = "GESSCALE_FIGURE_FORMATS"
DPI = 300

STYLE: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "figure.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.0,
    "savefig.dpi": DPI,
    "svg.fonttype": "none",  # SVG text stays text (searchable, editable, measurable)
    "pdf.fonttype": 42,  # TrueType in the PDF: editable text, accepted by publishers
    "ps.fonttype": 42,
}


def pyplot() -> Any:
    """matplotlib.pyplot on the headless Agg backend with `STYLE` and the palette applied."""
    import matplotlib

    matplotlib.use("Agg")
    from cycler import cycler

    matplotlib.rcParams.update({**STYLE, "axes.prop_cycle": cycler(color=PALETTE)})
    import matplotlib.pyplot as plt

    return plt


# The policies of the paper's comparison (Table III) first, then the offline optimum: each of these six has a
# colour of its own, so the policies compared side by side never differ by line style alone (gesscale and
# mdl-nlunaware shared one when the order was the registry's); the rest follow in registry order.
STYLE_FIRST = ("gesscale", "mdl-nlunaware", "thr-nlaware", "thr-nlunaware", "gesscale-plus", "optimal")


def policy_style(pid: str) -> dict[str, Any]:
    """Colour, line style and marker of a policy, fixed by its place in `STYLE_FIRST` then the registry (16
    policies: 6 colours times 3 line styles, 16 markers), so a policy looks the same in every figure."""
    from gesscale.policies.base import policy_ids

    ids = [*STYLE_FIRST, *(p for p in policy_ids() if p not in STYLE_FIRST)]
    i = ids.index(pid) if pid in ids else len(ids) + sum(map(ord, pid))
    n = len(POLICY_COLOURS)
    return {"color": POLICY_COLOURS[i % n], "linestyle": LINESTYLES[(i // n) % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)]}


def formats() -> tuple[str, ...]:
    """The formats every figure is written in: `FORMATS`, or the ones `GESSCALE_FIGURE_FORMATS` names
    (comma-separated; png always among them, as reports show the PNG). UserError on anything else."""
    raw = os.environ.get(FORMATS_ENV, "")
    if not raw.strip():
        return FORMATS
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise UserError(f"{FORMATS_ENV}: unknown figure format {unknown[0][:20]!r} (choose among png, svg, pdf)")
    if "png" not in names:
        raise UserError(f"{FORMATS_ENV} must include png (reports show the PNG), got {raw.strip()[:40]!r}")
    return tuple(f for f in FORMATS if f in names)


def paths_of(path: str | Path) -> list[Path]:
    """The files `save(fig, path)` writes: one per format of `formats()`, PNG first."""
    p = Path(path)
    return [p.with_suffix(f".{fmt}") for fmt in formats()]


def save(fig: Any, path: str | Path) -> Path:
    """Write the figure in every format of `formats()` (PNG at `DPI`), creating the folder; close it; return the
    PNG's path."""
    import matplotlib.pyplot as plt

    files = paths_of(path)
    files[0].parent.mkdir(parents=True, exist_ok=True)
    no_date = {".svg": {"Date": None}, ".pdf": {"CreationDate": None}}  # the same figure, the same bytes
    for i, f in enumerate(files):
        fig.savefig(f, dpi=DPI, metadata=no_date.get(f.suffix))
        if i == 0 and fig.get_layout_engine() is not None:
            fig.set_layout_engine("none")  # laid out once for the PNG: the vector files keep that layout
    plt.close(fig)
    return files[0]
