"""`gesscale k8s render --query`: the query reaches the driver Deployment's command line; a file on this machine
is refused with one line (it would not reach the pod), a module of the image is passed on as given."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gesscale.cli import main


def _driver_args(folder: Path) -> list[str]:
    docs = yaml.safe_load_all((folder / "driver.yaml").read_text())
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("query", ["frequent-routes", "mylab.queries.hot_spots:build"])
def test_the_query_reaches_the_driver_command_line(query: str, tmp_path: Path) -> None:
    assert main(["k8s", "render", "-o", str(tmp_path), "--query", query]) == 0
    args = _driver_args(tmp_path)
    assert args[:2] == ["job", "run"] and args[args.index("--query") + 1] == query


def test_the_default_query_is_the_jobs_own(tmp_path: Path) -> None:
    assert main(["k8s", "render", "-o", str(tmp_path)]) == 0
    assert "--query" not in _driver_args(tmp_path)  # the job's default, nearest-landmark


@pytest.mark.parametrize(("query", "words"), [
    ("{tmp}/mine.py", "does not reach the driver pod"),
    ("{tmp}/mine.py:build", "does not reach the driver pod"),
    ("frequent-rootes", "not a built-in query"),
    ("mylab.queries:build here", "not a built-in query"),
])
def test_a_query_the_pod_cannot_load_is_one_line_and_exit_2(query: str, words: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mine.py").write_text("def build(rides):\n    return rides\n")
    assert main(["k8s", "render", "-o", str(tmp_path / "out"), "--query", query.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gesscale: error: --query") and words in err and "\n" not in err
    assert not (tmp_path / "out").exists()
