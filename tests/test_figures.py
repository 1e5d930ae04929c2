"""Every figure the commands write exists as PNG (>= 300 dpi), SVG and PDF, and none has two texts on top of each
other or a text cut by the figure's edge (measured from the renderer: every Text actually drawn, tick labels,
legend entries and titles included). Plus the figures' own defects: optimal in figure 7, the regret box plots'
title and legend, the excess heatmap's linear colours, the time axis under a panel with none below it."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gesscale import figures
from gesscale.cli import main
from tests.cli.test_cli import MAP, scenario_text

AUDITED: dict[str, Any] = {}  # file name -> the figure as saved


def drawn_texts(fig: Any) -> tuple[list[Any], list[Any], tuple[float, float]]:
    """(text, window extent) of every Text the renderer draws (visible and not empty) and the frames of the
    legends drawn, in display pixels, and the canvas size: measured while the figure is saved at the saved
    resolution (a layout engine lays it out then)."""
    import matplotlib.legend
    import matplotlib.text

    drawn: dict[int, Any] = {}
    frames: dict[int, Any] = {}
    size: list[float] = [0.0, 0.0]
    draw_text, draw_legend = matplotlib.text.Text.draw, matplotlib.legend.Legend.draw

    def record(self: Any, renderer: Any) -> Any:
        result = draw_text(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn[id(self)] = (self.get_text(), self.get_window_extent(renderer))  # the last draw counts
            size[:] = [renderer.width, renderer.height]
        return result

    def record_legend(self: Any, renderer: Any) -> Any:
        result = draw_legend(self, renderer)
        if self.get_visible():
            frames[id(self)] = self.get_window_extent(renderer)
        return result

    matplotlib.text.Text.draw, matplotlib.legend.Legend.draw = record, record_legend
    try:
        fig.savefig(io.BytesIO(), format="png", dpi=figures.DPI)
    finally:
        matplotlib.text.Text.draw, matplotlib.legend.Legend.draw = draw_text, draw_legend
    return list(drawn.values()), list(frames.values()), (size[0], size[1])


def _cross(a: Any, b: Any) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1


def _inside(inner: Any, outer: Any) -> bool:
    return inner.x0 >= outer.x0 - 1 and inner.x1 <= outer.x1 + 1 and inner.y0 >= outer.y0 - 1 and \
        inner.y1 <= outer.y1 + 1


def text_problems(fig: Any) -> list[str]:
    """Pairs of drawn texts that intersect (by more than a pixel each way), a legend's frame over a text not its
    own, and texts cut by the figure's edge."""
    texts, frames, (w, h) = drawn_texts(fig)
    out = [f"cut by the edge: {t!r}" for t, b in texts if b.x0 < -1 or b.y0 < -1 or b.x1 > w + 1 or b.y1 > h + 1]
    out += [f"overlap: {ta!r} and {tb!r}" for (ta, a), (tb, b) in itertools.combinations(texts, 2) if _cross(a, b)]
    out += [f"a legend covers {t!r}" for frame in frames for t, b in texts if _cross(frame, b)
            and not _inside(b, frame)]
    return out


@pytest.fixture(autouse=True)
def every_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module checks all three formats: undo the suite's PNG-only setting (tests/conftest.py)."""
    monkeypatch.delenv(figures.FORMATS_ENV, raising=False)


@pytest.fixture
def audit(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """Wrap `gesscale.figures.save`: every figure a command saves is measured first; name -> problems."""
    found: dict[str, list[str]] = {}
    original = figures.save

    def save(fig: Any, path: str | Path) -> Path:
        found[Path(path).name] = text_problems(fig)
        AUDITED[Path(path).name] = fig
        return original(fig, path)

    monkeypatch.setattr(figures, "save", save)
    yield found


def check_files(folder: Path, names: list[str]) -> None:
    from PIL import Image

    for name in names:
        stem = (folder / name).with_suffix("")
        for fmt in figures.FORMATS:
            assert stem.with_suffix(f".{fmt}").stat().st_size > 0, f"{stem}.{fmt} missing"
        dpi = Image.open(stem.with_suffix(".png")).info["dpi"]
        assert min(dpi) >= 299.5, f"{name}: {dpi} dpi"
        assert "<text" in stem.with_suffix(".svg").read_text()  # text as text, not paths


def scenarios(tmp_path: Path) -> Path:
    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "map.yaml").write_text(MAP)
    (folder / "a.yaml").write_text(scenario_text())
    (folder / "b.yaml").write_text(scenario_text().replace("name: t", "name: u").replace("[50, 150]",
                                                                                         "[150, 60]"))
    return folder


def test_simulate_plot_writes_figure7_with_optimal_in_every_format(tmp_path: Path, audit: dict) -> None:
    sc = scenarios(tmp_path)
    assert main(["simulate", "-s", str(sc / "a.yaml"), "-p", "gesscale,thr-nlaware", "--plot",
                 str(tmp_path / "p")]) == 0
    check_files(tmp_path / "p", ["t-figure7.png"])
    assert audit["t-figure7.png"] == []
    titles = [ax.get_title() for ax in AUDITED["t-figure7.png"].axes]
    assert "optimal (reference)" in titles and "ideal (reference)" in titles


def test_compare_writes_every_figure_in_every_format_without_overlaps(tmp_path: Path, audit: dict) -> None:
    from matplotlib.colors import Normalize, PowerNorm

    sc = scenarios(tmp_path)
    out = tmp_path / "cmp"
    (sc / "map.yaml").rename(tmp_path / "map.yaml")
    for f in sc.glob("*.yaml"):
        f.write_text(f.read_text().replace("latency_map: map.yaml", f"latency_map: {tmp_path / 'map.yaml'}"))
    assert main(["compare", "-s", str(sc), "-p", "all", "-n", "1", "-j", "1", "-o", str(out)]) == 0
    names = ["heatmap-cost.png", "heatmap-excess.png", "regret-boxplots.png", "replicas-t.png", "replicas-u.png"]
    check_files(out, names)
    assert {n: audit[n] for n in names} == dict.fromkeys(names, [])
    image = AUDITED["heatmap-excess.png"].axes[0].images[0]
    assert type(image.norm) is Normalize and not isinstance(image.norm, PowerNorm)  # linear: 0.004 ≈ 0.000


def test_experiment_figures_in_every_format(tmp_path: Path, audit: dict) -> None:
    sc = scenarios(tmp_path)
    spec = tmp_path / "exp.yaml"
    spec.write_text(f"name: e\nscenario: {sc / 'a.yaml'}\npolicies: [gesscale, thr-nlaware]\nseeds: 1\n")
    assert main(["experiment", "run", str(spec), "--out", str(tmp_path / "b")]) == 0
    written = [n for n in audit if (tmp_path / "b" / "figures" / n).exists()]
    assert "figure7.png" in written
    check_files(tmp_path / "b" / "figures", written)
    assert {n: audit[n] for n in written} == dict.fromkeys(written, [])


def test_regret_boxplots_title_and_legend_with_2_scenarios_and_16_policies(tmp_path: Path, audit: dict) -> None:
    from gesscale.compare_plots import regret_boxplots
    from gesscale.policies.base import policy_ids

    for policies in (["gesscale", "ideal", "optimal"], list(policy_ids())):
        row = {"cost_vs_optimal": 1.2, "excess_vs_optimal": 0.01}
        matrix = {sc: {p: dict(row, failed_seeds=[1] if p == policies[0] else []) for p in policies}
                  for sc in ("s1", "s2")}
        regret_boxplots(matrix, tmp_path / f"r{len(policies)}.png")
        assert audit[f"r{len(policies)}.png"] == []
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = AUDITED[f"r{len(policies)}.png"]
        canvas = FigureCanvasAgg(fig)  # the saved figure was closed: draw it again
        canvas.draw()
        renderer = canvas.get_renderer()
        legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert legends
        for legend, ax in itertools.product(legends, fig.axes):  # never over a box
            assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_a_panel_with_no_panel_below_it_has_the_time_axis(tmp_path: Path, audit: dict) -> None:
    from gesscale.compare_plots import replicas_plot

    series = {p: ([1, 2, 3, 2], [1, 2, 2, 2]) for p in ("gesscale", "ideal", "optimal", "static", "thr-nlaware")}
    replicas_plot("s", series, 60.0, tmp_path / "rep.png", caption="synthetic")
    fig = AUDITED["rep.png"]
    ax = fig.axes[2]  # first row, third column: the second row has two panels
    assert ax.get_xlabel() == "time (min)"
    assert any(t.get_visible() and t.get_text() for t in ax.get_xticklabels())
    assert audit["rep.png"] == []


def test_timeline_and_network_figures_in_every_format(tmp_path: Path, audit: dict) -> None:
    from gesscale.scenario import load_scenario
    from gesscale.simulate import run_once
    from gesscale.testbed.report import plot_timeline
    from netem.validate import PairCheck, Validation, plot_validation

    sc = scenarios(tmp_path)
    run = run_once(load_scenario(sc / "a.yaml"), "gesscale", 1, keep_history=True)
    reconfigs = [{"kind": "live", "nodes": ["a", "b"], "added": ["b"], "started_s": 600.0, "effective_s": 620.0,
                  "pause_s": 20.0}]
    plot_timeline(run.history, reconfigs, None, tmp_path / "timeline.png", "live run")
    pairs = tuple(PairCheck(a, b, rtt, 0.0, 0.0, 20, 20, rtt + 0.3, rtt + 0.8, 0.1, 2.0, True, True)
                  for a, b, rtt in (("a", "b", 10.0), ("a", "c", 20.0), ("b", "c", 15.0)))
    plot_validation(Validation(pairs, 2.0, 10.0, "userspace"), tmp_path / "network.png")
    check_files(tmp_path, ["timeline.png", "network.png"])
    assert audit["timeline.png"] == [] and audit["network.png"] == []


@pytest.mark.parametrize(("value", "written"), [("png", ("png",)), (" PNG , pdf ", ("png", "pdf")),
                                                 ("", ("png", "svg", "pdf")), ("svg,png,svg", ("png", "svg"))])
def test_figure_formats_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str,
                                             written: tuple[str, ...]) -> None:  # fmt: skip
    monkeypatch.setenv(figures.FORMATS_ENV, value)
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert figures.save(fig, tmp_path / "f.png") == tmp_path / "f.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"f.{fmt}" for fmt in written)


@pytest.mark.parametrize("value", ["svg", "png,jpeg", "png;svg", "x" * 500])
def test_a_wrong_figure_format_is_one_line_before_any_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str], value: str) -> None:
    monkeypatch.setenv(figures.FORMATS_ENV, value)
    out = tmp_path / "cmp"
    assert main(["compare", "-s", str(scenarios(tmp_path)), "-p", "gesscale", "-n", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gesscale: error: {figures.FORMATS_ENV}") and len(err[0]) < 160
    assert not out.exists()
