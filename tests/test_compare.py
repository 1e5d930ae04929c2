"""The comparison matrix: aggregation and Markdown on hand-made numbers, one small real run of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.compare import JobResult, best_policies, find_scenarios, matrix_markdown, summarise
from gesscale.compare_plots import normalised_cost
from gesscale.errors import UserError
from gesscale.metrics import METRIC_KEYS

ROOT = Path(__file__).resolve().parents[1]


def _metrics(**values: float) -> dict[str, float]:
    m = {k: 0.0 for k in METRIC_KEYS}
    m.update(values)
    return m


def test_summarise_takes_medians_over_seeds() -> None:
    results = [
        JobResult("s", "a", seed, _metrics(cost=c, excess_time=e))
        for seed, c, e in ((1, 100.0, 0.3), (2, 130.0, 0.1), (3, 110.0, 0.2))
    ]
    matrix = summarise(results)
    assert matrix["s"]["a"]["cost"] == 110.0
    assert matrix["s"]["a"]["excess_time"] == pytest.approx(0.2)
    assert set(matrix["s"]["a"]) == set(METRIC_KEYS)


def test_best_value_is_bold_and_references_are_not_marked() -> None:
    matrix = {
        "s1": {"a": _metrics(cost=90.0, jitter=-3.0), "b": _metrics(cost=120.0, jitter=1.0),
               "ideal": _metrics(cost=80.0, jitter=0.0)},
        "s2": {"a": _metrics(cost=50.0), "b": _metrics(cost=40.0), "ideal": _metrics(cost=30.0)},
    }
    assert best_policies(matrix["s1"], "cost") == {"a"}
    assert best_policies(matrix["s1"], "jitter") == {"b"}  # closest to 0
    md = matrix_markdown(matrix, seeds=3)
    cost_table = md.split("## cost")[1].split("##")[0]
    assert "| a | **90** | 50 |" in cost_table
    assert "| b | 120 | **40** |" in cost_table
    assert "| ideal | 80 | 30 |" in cost_table
    assert md.count("\n## ") == len(METRIC_KEYS)


def test_normalised_cost_divides_by_the_oracle() -> None:
    matrix = {"s": {"a": _metrics(cost=150.0), "ideal": _metrics(cost=100.0)}}
    assert normalised_cost(matrix) == {"s": {"a": 1.5, "ideal": 1.0}}


def test_scenario_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no scenario files"):
        find_scenarios(tmp_path)
    with pytest.raises(UserError, match="not found"):
        find_scenarios(tmp_path / "missing")


def _short_scenario(folder: Path, name: str, workload: str) -> None:
    lmap = ROOT / "inventory" / "latency" / "pi10.yaml"
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\ncontrol_period_s: 60\ncluster:\n  latency_map: {lmap}\n  min_replicas: 1\n"
        "  max_replicas: 8\noperator:\n  alpha: 60.0\n  beta: 0.9\n  gamma: 0.1\n  noise: 0.03\n"
        f"  reconfig_pause_s: 120\n  initial_replicas: 2\nworkload:\n{workload}seed: 1\n"
    )


def test_compare_cli_writes_the_three_kinds_of_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scen = tmp_path / "scen"
    scen.mkdir()
    _short_scenario(scen, "mini-steps", "  kind: steps\n  levels: [60, 250, 120]\n  step_s: 600\n")
    _short_scenario(scen, "mini-spike", "  kind: spike\n  base: 100\n  peak: 300\n  at_s: 600\n  width_s: 600\n"
                                        "  duration_s: 1800\n")
    out = tmp_path / "out"
    code = main(["compare", "--scenarios", str(scen), "--policies", "gesscale,gesscale-plus,ideal",
                 "--seeds", "2", "--out", str(out), "--workers", "2"])
    assert code == 0
    matrix = json.loads((out / "matrix.json").read_text())
    assert set(matrix) == {"mini-steps", "mini-spike"}
    for per in matrix.values():
        assert set(per) == {"gesscale", "gesscale-plus", "ideal"}
        for metrics in per.values():
            assert set(metrics) == set(METRIC_KEYS)
        assert per["ideal"]["excess_time"] == 0.0
    md = (out / "matrix.md").read_text()
    assert "## excess_time" in md and "**" in md
    pngs = ["heatmap-cost.png", "heatmap-excess.png", "regret-boxplots.png", "replicas-mini-steps.png",
            "replicas-mini-spike.png"]
    for name in pngs:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    printed = capsys.readouterr().out
    assert "16 runs on 2 worker(s)" in printed  # 12 + optimal, run as the regret reference
    regret = json.loads((out / "regret.json").read_text())
    assert set(regret["mini-steps"]) == {"gesscale", "gesscale-plus", "ideal", "optimal"}
    assert regret["mini-steps"]["optimal"]["cost_vs_optimal"] == 1.0
    assert "## regret" in md
    # two scenarios: one row per policy over them too, in the console, matrix.md and regret-distribution.json
    assert "over the scenarios" in printed and "### over the scenarios" in md
    dist = json.loads((out / "regret-distribution.json").read_text())
    assert dist["optimal"]["cost_vs_optimal_median"] == 1.0 and dist["gesscale"]["scenarios"] == 2
