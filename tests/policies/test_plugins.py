"""A researcher's own policy, loaded from a file outside the repository: the example of docs/policies.md runs
in simulate and compare (worker processes included), and mistakes are one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.policies.base import load_plugin, make_policy

ROOT = Path(__file__).resolve().parents[2]


def _example(tmp_path: Path) -> Path:
    text = (ROOT / "docs" / "policies.md").read_text()
    code = re.search(r"```python\n# my_policy.py\n(.*?)```", text, re.S)
    assert code, "the example is in docs/policies.md"
    path = tmp_path / "my_policy.py"
    path.write_text(code.group(1))
    return path


def _gesscale(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gesscale", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_the_documented_example_runs_in_compare_beside_a_built_in_policy(tmp_path: Path) -> None:
    plugin = _example(tmp_path)
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "pi10-taxi.yaml").write_text((ROOT / "scenarios" / "pi10-taxi.yaml").read_text())
    out = tmp_path / "m"
    res = _gesscale("compare", "--scenarios", str(scenarios), "--policies", f"gesscale,{plugin}:PerRate",
                    "--seeds", "2", "--workers", "2", "--out", str(out), cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    matrix = json.loads((out / "matrix.json").read_text())
    per_policy = next(iter(matrix.values()))
    assert set(per_policy) == {"gesscale", "per-rate"}
    # it really decided: a taxi day needs more than one replica at its peak
    assert per_policy["per-rate"]["avg_replicas"] > 1.0


def test_the_example_runs_in_simulate(tmp_path: Path) -> None:
    plugin = _example(tmp_path)
    res = _gesscale("simulate", "--scenario", str(ROOT / "scenarios" / "pi10-taxi.yaml"), "--policies",
                    f"{plugin}:PerRate", "--seeds", "1", "--json", str(tmp_path / "s.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((tmp_path / "s.json").read_text())
    assert set(doc["policies"]) == {"per-rate"} and doc["policies"]["per-rate"]["avg_replicas"] > 1.0


@pytest.mark.parametrize(("content", "name", "message"), [
    (None, "PerRate", "no such file"),
    ("raise RuntimeError('boom')\n", "PerRate", "importing bad.py failed: RuntimeError: boom"),
    ("class PerRate:\n    id = 'x'\n", "PerRate", "no Policy subclass named 'PerRate'"),
    ("from gesscale.policies.base import Policy\nclass P(Policy):\n    id = 'gesscale'\n"
     "    def decide(self, obs, ctx): ...\n", "P", "id 'gesscale' is already a policy"),
    ("from gesscale.policies.base import Policy\nclass P(Policy):\n    def decide(self, obs, ctx): ...\n", "P",
     "must set a class attribute id"),
    ("from gesscale.policies.base import Policy\nclass P(Policy):\n    id = '../../x'\n"
     "    def decide(self, obs, ctx): ...\n", "P", "id: '../../x' is not a valid policy name"),
])
def test_a_bad_plugin_is_one_clear_error(tmp_path: Path, content: str | None, name: str, message: str) -> None:
    path = tmp_path / "bad.py"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError, match=re.escape(message)):
        load_plugin(f"{path}:{name}")


def test_make_policy_takes_a_spec_and_the_cli_reports_a_bad_one_in_one_line(tmp_path: Path) -> None:
    plugin = _example(tmp_path)
    assert make_policy(f"{plugin}:PerRate").id == "per-rate"
    res = _gesscale("simulate", "--scenario", str(ROOT / "scenarios" / "pi10-taxi.yaml"), "--policies",
                    f"{tmp_path}/missing.py:X", cwd=tmp_path)
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr
