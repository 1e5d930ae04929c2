"""Regret against the references, seed by seed, and failing policies marked rather than ranked cheap."""

from __future__ import annotations

import pytest

from gesscale.compare import (
    JobResult,
    best_policies,
    distribution_markdown,
    matrix_markdown,
    regret_by_scenario,
    summarise,
)
from gesscale.metrics import METRIC_KEYS
from gesscale.regret import Outcome, distribution, failing, regret, status


def test_ratios_and_differences_are_taken_seed_by_seed_then_the_median() -> None:
    runs = {
        "optimal": [Outcome(1, 100.0, 0.0), Outcome(2, 200.0, 0.0), Outcome(3, 50.0, 0.01)],
        "ideal": [Outcome(1, 110.0, 0.0), Outcome(2, 220.0, 0.0), Outcome(3, 55.0, 0.0)],
        # cheap on the expensive seed, dear on the cheap one: a ratio of medians would hide it
        "p": [Outcome(1, 120.0, 0.02), Outcome(2, 210.0, 0.0), Outcome(3, 100.0, 0.05)],
    }
    row = regret(runs)["p"]
    assert row["cost_vs_optimal"] == pytest.approx(1.2)  # median of 1.2, 1.05, 2.0
    assert row["cost_vs_ideal"] == pytest.approx(120.0 / 110.0)  # median of 1.0909, 0.9545, 1.818
    assert row["excess_vs_optimal"] == pytest.approx(0.02)  # median of 0.02, 0.0, 0.04
    assert row["failed_seeds"] == 0 and row["seeds"] == 3
    assert regret(runs)["optimal"]["cost_vs_optimal"] == pytest.approx(1.0)


def test_a_missing_reference_gives_none() -> None:
    row = regret({"p": [Outcome(1, 10.0, 0.0)], "ideal": [Outcome(1, 5.0, 0.0)]})["p"]
    assert row["cost_vs_optimal"] is None and row["cost_vs_ideal"] == pytest.approx(2.0)


def test_a_backlog_never_drained_is_failing() -> None:
    rows = regret({"p": [Outcome(1, 10.0, 1.0, drained=False), Outcome(2, 10.0, 0.0)]})
    assert failing(rows["p"]) and status(rows["p"]) == "FAIL 1/2"
    assert not failing(regret({"p": [Outcome(1, 10.0, 0.5)]})["p"])


def _job(policy: str, seed: int, cost: float, excess: float = 0.0, drained: bool = True) -> JobResult:
    m = {k: 0.0 for k in METRIC_KEYS}
    m.update(cost=cost, excess_time=excess)
    return JobResult("s", policy, seed, m, drained=drained)


def test_the_cheapest_policy_is_not_bold_when_it_never_drains() -> None:
    results = [
        _job("optimal", 1, 100.0), _job("ideal", 1, 110.0),
        _job("hoarder", 1, 60.0, excess=1.0, drained=False),
        _job("honest", 1, 130.0), _job("other", 1, 150.0),
    ]
    matrix, rg = summarise(results), regret_by_scenario(results)
    assert best_policies(matrix["s"], "cost") == {"hoarder"}  # without the regret, the cheap failure would win
    assert best_policies(matrix["s"], "cost", rg["s"]) == {"honest"}
    md = matrix_markdown(matrix, seeds=1, regret_matrix=rg)
    cost_table = md.split("## cost")[1].split("##")[0]
    assert "| hoarder | 60 FAIL |" in cost_table and "| honest | **130** |" in cost_table
    section = md.split("## regret")[1]
    assert "| hoarder | FAIL 1/1 (0.600) |" in section and "| honest | 1.300 |" in section


def test_the_distribution_over_scenarios_takes_medians_and_the_linear_95th_percentile() -> None:
    # 21 scenarios: p's cost / optimal is 1.00, 1.01, ..., 1.20 and its excess 0, 0.001, ..., 0.020
    by_scenario = {
        f"s{i:02d}": regret({"optimal": [Outcome(1, 100.0, 0.0)],
                             "p": [Outcome(1, 100.0 + i, i / 1000, drained=i != 20, late=i / 100)]})
        for i in range(21)
    }
    row = distribution(by_scenario)["p"]
    assert row["cost_vs_optimal_median"] == pytest.approx(1.10)
    assert row["cost_vs_optimal_p95"] == pytest.approx(1.19)  # rank 0.95 x 20 = 19
    assert row["excess_vs_optimal_median"] == pytest.approx(0.010)
    assert row["excess_vs_optimal_p95"] == pytest.approx(0.019)
    assert row["scenarios"] == 21 and row["failing"] == 1
    assert distribution(by_scenario)["optimal"]["cost_vs_optimal_p95"] == pytest.approx(1.0)
    text = distribution_markdown(distribution(by_scenario))
    assert row["late_median"] == pytest.approx(0.10) and row["late_p95"] == pytest.approx(0.19)
    assert "| p | 1.100 | 1.190 | +0.0100 | +0.0190 | 10.0 % | 19.0 % | 1 of 21 |" in text
    assert "| optimal | 1.000 | 1.000 | +0.0000 | +0.0000 | 0.0 % | 0.0 % | 0 of 21 |" in text
