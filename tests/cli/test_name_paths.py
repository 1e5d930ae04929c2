"""Names become paths: a scenario's `name` with `../` or a newline writes nothing outside `--timeseries`.

The name is refused where the scenario is read (one line, exit 2), and every writer that derives a file name
from a name keeps the resolved path inside its folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gesscale.cli import main
from gesscale.compare import write_timeseries
from gesscale.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def _scenario(tmp: Path, name: str) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "pi10-spike.yaml").read_text())
    doc["name"] = name
    doc["cluster"]["latency_map"] = str(ROOT / "inventory" / "latency" / "pi10.yaml")
    doc["workload"]["duration_s"] = 600
    (tmp / "scenarios").mkdir()
    path = tmp / "scenarios" / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("name", ["../../escaped", "a\nb", "<tmp>/abs/x", "a/b", ".."])
@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_scenario_name_cannot_write_outside_the_timeseries_folder(tmp_path: Path, capsys, name: str,
                                                                     command: str) -> None:
    work = tmp_path / "work" / "deep"
    work.mkdir(parents=True)
    series = work / "ts"
    scenario = _scenario(work, name.replace("<tmp>", str(tmp_path)))  # an absolute name, kept under tmp_path
    args = (["simulate", "--scenario", str(scenario)] if command == "simulate"
            else ["compare", "--scenarios", str(scenario.parent), "--out", str(work / "out")])  # fmt: skip
    code = main([*args, "--policies", "static", "--seeds", "1", "--timeseries", str(series)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a valid scenario name" in err, err
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["work/deep/scenarios/s.yaml"], written


def test_the_writer_keeps_a_derived_path_in_its_folder_whoever_called_it(tmp_path: Path) -> None:
    from gesscale.compare import JobResult

    bad = JobResult("../../x", "static", 1, {}, 60.0, rows=[{"t_s": 0}])
    with pytest.raises(UserError, match="outside"):
        write_timeseries([bad], tmp_path / "ts")
    assert not (tmp_path / "x-static.csv").exists()
