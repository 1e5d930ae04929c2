"""Figures and tables fit for a paper: colours follow printed values, failing cells are marked, provenance named."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from gesscale.compare import matrix_markdown
from gesscale.compare_plots import heatmap, printed_values
from gesscale.metrics import METRIC_KEYS
from gesscale.report import workload_provenance, write_csv
from gesscale.scenario import load_scenario
from gesscale.simulate import TIMESERIES_COLUMNS, period_rows, run_once


def test_equal_printed_values_get_equal_colour_values() -> None:
    grid = np.array([[0.0001, 0.0004], [0.0012, np.nan]])
    shown = printed_values(grid, "{:.3f}")
    assert shown[0, 0] == shown[0, 1] == 0.0 and shown[1, 0] == 0.001 and np.isnan(shown[1, 1])
    assert printed_values(np.array([1234.4]), "{:,.0f}")[0] == 1234.0


def test_heatmap_with_one_scenario_and_a_failing_policy(tmp_path: Path) -> None:
    values = {"s": {"a": 1.2, "static": 0.5, "ideal": 1.0}}
    path = heatmap(values, "cost / ideal", tmp_path / "h.png", failed={("s", "static")}, references=("ideal",),
                   caption="Workloads: s: synthetic cosine profile")
    assert path.stat().st_size > 1000


def _m(**kw: float) -> dict[str, float]:
    m = {k: 1.0 for k in METRIC_KEYS}
    m.update(kw)
    return m


def test_matrix_markdown_never_rewards_a_failing_policy_and_names_the_workload() -> None:
    matrix = {"s": {"a": _m(cost=100.0), "b": _m(cost=120.0), "c": _m(cost=150.0)}}
    regret = {"s": {"a": {"failed_seeds": 1, "seeds": 3}, "b": {"failed_seeds": 0, "seeds": 3},
                    "c": {"failed_seeds": 0, "seeds": 3}}}
    md = matrix_markdown(matrix, 3, regret, {"s": "recorded rate file day.csv"})
    cost = md.split("## cost")[1].split("##")[0]
    assert "| a | 100 FAIL |" in cost and "| b | **120** |" in cost
    assert "s: recorded rate file day.csv" in md


def test_provenance_says_synthetic_or_names_the_file() -> None:
    assert "synthetic diurnal taxi profile" in workload_provenance({"kind": "taxi", "speed": 10})
    assert workload_provenance({"kind": "csv", "path": "/data/may-1.csv"}) == "recorded rate file may-1.csv"
    assert workload_provenance({"kind": "cosine"}) == "synthetic cosine profile"


def test_period_rows_export_one_row_per_control_period(tmp_path: Path) -> None:
    sc = load_scenario("scenarios/pi10-spike.yaml")
    r = run_once(sc, "gesscale", sc.seed, keep_history=True)
    rows = period_rows(r)
    assert len(rows) == len(r.history) and rows[0]["t_s"] == sc.control_period_s
    assert sum(row["applied"] for row in rows) == r.metrics.reconfigurations
    path = write_csv(tmp_path / "t.csv", rows, TIMESERIES_COLUMNS)
    with path.open() as f:
        read = list(csv.DictReader(f))
    assert list(read[0]) == list(TIMESERIES_COLUMNS) and len(read) == len(rows)
    assert all(row["reason"] for row in read)


def test_reproduction_has_the_paper_as_a_labelled_reference_row() -> None:
    from gesscale.experiment.paper import PAPER_CLAIMS, reproduction_markdown, reproduction_rows

    medians = {"gesscale": _m(cost=80.0, reconfigurations=10.0), "thr-nlaware": _m(cost=100.0, reconfigurations=20.0)}
    rows = reproduction_rows(medians)
    assert str(rows[0]["label"]).startswith("paper (reference)") and rows[0]["resources_saved_pct"] == 17.0
    assert rows[1]["resources_saved_pct"] == pytest.approx(20.0)
    assert rows[1]["fewer_reconfigurations_pct"] == pytest.approx(50.0)
    assert PAPER_CLAIMS["fewer_reconfigurations_pct"] == 52.0
    md = reproduction_markdown(medians, "synthetic diurnal taxi profile", 3)
    assert "Workload: synthetic diurnal taxi profile" in md
    assert reproduction_rows({"thr-nlaware": _m()}) == []
