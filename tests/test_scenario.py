"""Scenario files are read strictly: unknown keys, NaN/inf, out-of-range values and fractional counts are one
`UserError` line naming the key; legal but suspicious values are warnings. Each case is one row of the
validation table in docs/controller.md."""

from __future__ import annotations

import copy
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gesscale.errors import UserError
from gesscale.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[1]
BASE: dict[str, Any] = {
    "name": "t",
    "control_period_s": 60,
    "cluster": {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 20}, "b": {"c": 15}},
                "min_replicas": 1, "max_replicas": 3},
    "operator": {"alpha": 60, "beta": 0.9, "gamma": 0.1, "noise": 0.03, "reconfig_pause_s": 20,
                 "initial_replicas": 2},
    "workload": {"kind": "cosine", "mean": 100, "amplitude": 50, "noise": 0.05, "duration_s": 600},
    "seed": 1,
}


def _with(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[p]
    node[last] = value
    return doc


CASES = [
    ("contrl_period_s", 60, r"unknown key 'contrl_period_s' \(expected name, control_period_s"),
    ("operator.nosie", 0.1, r"operator: unknown key 'nosie'"),
    ("workload.amplitde", 1, r"workload \(cosine\): unknown key 'amplitde'"),
    ("operator.alpha", math.nan, r"operator: 'alpha' must be finite, got nan"),
    ("workload.mean", math.inf, r"workload \(cosine\): 'mean' must be finite, got inf"),
    ("operator.noise", 20, r"operator: 'noise' must be in \[0, 1\), got 20"),
    ("operator.noise", 1.0, r"operator: 'noise' must be in \[0, 1\), got 1"),
    ("operator.noise", -0.1, r"operator: 'noise' must be in \[0, 1\), got -0.1"),
    ("workload.noise", 20, r"workload \(cosine\): 'noise' must be in \[0, 1\), got 20"),
    ("cluster.max_replicas", 2.5, r"cluster: 'max_replicas' must be a whole number, got 2.5"),
    ("operator.initial_replicas", 1.5, r"operator: 'initial_replicas' must be a whole number, got 1.5"),
    ("seed", 1.5, r"'seed' must be a whole number, got 1.5"),
    ("seed", -1, r"'seed' must be in \[0, 1e\+09\], got -1"),
    ("control_period_s", 0.5, r"'control_period_s' must be in \[1, 86400\], got 0.5"),
    ("operator.initial_replicas", 0, r"'initial_replicas' must be >= 1, got 0"),
    ("operator.beta", 0, r"operator: 'beta' must be in \(0, 4\], got 0"),
    ("warmup_s", -5, r"'warmup_s' must be in \[0, 86400\], got -5"),
    ("cluster.rtt_ms", {"a": {"b": 1e300, "c": 20}, "b": {"c": 15}},
     r"pair \(a, b\): RTT 1e\+300 ms is above 10000 ms, the largest RTT taken"),
    ("cluster.rtt_ms", {"a": {"b": math.nan, "c": 20}, "b": {"c": 15}}, r"pair \(a, b\): RTT must be finite"),
    ("controller", {"latency_source": "probes"}, r"controller: 'latency_source' must be one of map, measured, both"),
    ("after_drain", 3, r"after_drain: must be a mapping of periods, max_periods, got 3"),
    ("after_drain", {"periods": 4, "max_periods": 2}, r"after_drain: 'max_periods' must be in \[4, 1000\], got 2"),
    ("after_drain", {"period": 3}, r"after_drain: unknown key 'period'"),
    ("operator.cold_start", {"seconds": 0, "rate": 8},
     r"operator: cold_start: 'seconds' must be in \[1, 3600\], got 0"),
    ("operator.cold_start", {"seconds": 6}, r"operator: cold_start: 'rate' must be a number"),
    ("input_end_known", "no", r"'input_end_known' must be true or false, got 'no'"),
]


@pytest.mark.parametrize(("path", "value", "message"), CASES)
def test_each_bad_value_is_one_line_naming_the_key(path: str, value: Any, message: str) -> None:
    scenario_from_dict(BASE, "s.yaml")  # the base itself is valid
    with pytest.raises(UserError) as err:
        scenario_from_dict(_with(path, value), "s.yaml")
    line = str(err.value)
    assert "\n" not in line and line.startswith("s.yaml"), line
    assert re.search(message, line), line


def test_a_map_name_too_long_for_the_file_system_is_one_line() -> None:
    """Found by the scenario property: `cluster.latency_map: 1201846...` (a 300-digit number) raised OSError
    (ENAMETOOLONG) from the search beside the scenario instead of one line."""
    doc = _with("cluster", {"latency_map": "9" * 300, "min_replicas": 1, "max_replicas": 3})
    with pytest.raises(UserError, match="cannot read latency map 9{300}: File name too long"):
        scenario_from_dict(doc, "s.yaml")


def test_initial_replicas_below_the_minimum_is_refused() -> None:
    doc = _with("cluster.min_replicas", 3)
    with pytest.raises(UserError, match=r"initial_replicas \(2\) outside \[min_replicas, max_replicas\] = \[3, 3\]"):
        scenario_from_dict(doc, "s.yaml")


def test_whole_floats_are_taken_as_counts() -> None:
    sc = scenario_from_dict(_with("operator.initial_replicas", 2.0), "s.yaml")
    assert sc.truth.initial_replicas == 2 and isinstance(sc.truth.initial_replicas, int)


@pytest.mark.parametrize(("path", "value", "warning"), [
    ("operator.beta", 1.2, "superlinear"),
    ("operator.noise", 0.6, "hardly be learnt"),
    ("warmup_s", 5, "still paused"),
    ("cluster.rtt_ms", {"a": {"b": 1500, "c": 20}, "b": {"c": 15}}, "above 1000 ms"),
])
def test_legal_but_suspicious_values_are_warnings(path: str, value: Any, warning: str) -> None:
    assert scenario_from_dict(BASE, "s.yaml").warnings == ()
    sc = scenario_from_dict(_with(path, value), "s.yaml")
    assert any(warning in w for w in sc.warnings), sc.warnings


def test_workload_keys_follow_the_kind() -> None:
    doc = _with("workload", {"kind": "taxi", "speed": 10, "duplication": 2.5, "days": 1})
    with pytest.raises(UserError, match=r"'duplication' must be a whole number"):
        scenario_from_dict(doc, "s.yaml")
    doc = _with("workload", {"kind": "taxi", "speed": 10, "mean": 5})
    with pytest.raises(UserError, match=r"workload \(taxi\): unknown key 'mean'"):
        scenario_from_dict(doc, "s.yaml")
    doc = _with("workload", {"kind": "steps", "levels": [10, math.nan], "step_s": 60})
    with pytest.raises(UserError, match=r"'levels\[1\]' must be finite"):
        scenario_from_dict(doc, "s.yaml")


def test_every_shipped_scenario_passes_without_warnings() -> None:
    from gesscale.scenario import load_scenario

    paths = sorted((ROOT / "scenarios").rglob("*.yaml"))
    assert paths
    for p in paths:
        assert load_scenario(p).warnings == (), p


def test_simulate_refuses_a_misspelled_key_with_exit_2(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_with("operator.nosie", 0.1)))
    res = subprocess.run([sys.executable, "-m", "gesscale", "simulate", "--scenario", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "unknown key 'nosie'" in res.stderr
