"""The experiment files the docs show and the repository ships are valid as they stand: docs/experiments.md's
examples are loaded from the page itself, `experiments/live-table3.yaml` is checked, and the policy count the
docs state is read from the registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gesscale.experiment.spec import load_spec, scenario_of
from gesscale.policies.base import policy_ids

ROOT = Path(__file__).resolve().parents[2]


def _yaml_blocks(page: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)


def test_the_example_specs_of_the_docs_load_when_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sim, live = _yaml_blocks("experiments.md")[:2]
    monkeypatch.chdir(ROOT)  # "run from the repository's root": relative paths resolve from there
    (tmp_path / "sim.yaml").write_text(sim)
    spec = load_spec(tmp_path / "sim.yaml")
    assert spec.environment == "sim" and "static" in spec.policies
    assert spec.policy_options == {"static": {"replicas": 3}}
    assert [e.kind for e in scenario_of(spec).latency_map.events] == ["crash"]  # checked against the map
    (tmp_path / "live.yaml").write_text(live)
    spec = load_spec(tmp_path / "live.yaml")
    assert spec.environment == "local" and spec.repeats == 3 and spec.compare == (("gesscale", "mdl-nlunaware"),)


def test_the_live_table3_spec_validates_with_six_blocks_for_its_pair() -> None:
    spec = load_spec(ROOT / "experiments" / "live-table3.yaml")
    assert set(spec.policies) == {"thr-nlunaware", "thr-nlaware", "mdl-nlunaware", "gesscale", "gesscale-plus"}
    assert ("gesscale", "mdl-nlunaware") in spec.compare and spec.repeats >= 6
    from gesscale.testbed import DEMO_MAP

    assert spec.latency_map == DEMO_MAP.resolve()  # the layout where placement matters (issue 29 point 2)


def test_the_policy_count_in_the_docs_is_the_registry_s() -> None:
    text = (ROOT / "docs" / "policies.md").read_text()
    stated = re.search(r"lists the (\d+) policies", text)
    assert stated and int(stated.group(1)) == len(policy_ids())
    table = text.split("## The policies", 1)[1].split("Notes on our reading", 1)[0]
    listed = {pid for cell in re.findall(r"^\| (`[^|]+`) \|", table, re.M) for pid in re.findall(r"`([\w-]+)`", cell)}
    assert listed == set(policy_ids())
