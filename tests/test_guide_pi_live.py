"""docs/pi-to-live-run.md, walked: every command block carries a check marker; the `dry-run` blocks run as
written (on a copy of the sample inventory, touching no host); the `run: fake-api` block's `gesscale k8s run` lines
run against the fake Kubernetes API and the job's HTTP API (tests/fixtures/k8s.py) and leave the files step 8
collects. That the `skip: real cluster only` blocks name only gesscale options that exist is checked with every
other block of the docs (tests/test_docs_examples.py)."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import shutil
from pathlib import Path

import pytest

from gesscale.cli import main
from tests.docs_blocks import Block, blocks_of, command_lines
from tests.fixtures.paths import ROOT
from tests.k8s.helpers import LMAP, build_cluster, observation

GUIDE = ROOT / "docs" / "pi-to-live-run.md"
MARKERS = ("dry-run", "fake-api", "real-cluster")


def kind(block: Block) -> str | None:
    """The guide's three levels from the check markers (tests/README.md, "Docs examples")."""
    if block.marker == "run" and block.detail == "fake-api":
        return "fake-api"
    if block.marker == "skip" and block.detail.startswith("real cluster only"):
        return "real-cluster"
    return block.marker if block.marker == "dry-run" else None


def blocks() -> list[tuple[str | None, list[str]]]:
    """(level, command lines) of every fenced block of the guide."""
    return [(kind(b), command_lines(b.body)) for b in blocks_of(GUIDE)]


def of(marker: str) -> list[str]:
    return [ln for m, lines in blocks() if m == marker for ln in lines]


def test_every_block_says_how_far_it_was_checked() -> None:
    found = blocks()
    assert found and all(m in MARKERS for m, _ in found), [(m, lines[:1]) for m, lines in found]
    assert {m for m, _ in found} == set(MARKERS)


@pytest.fixture
def rack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding the repository's inventory/, as a clone does, as the current directory."""
    shutil.copytree(ROOT / "inventory", tmp_path / "inventory")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GESSCALE_K3S_TOKEN", raising=False)
    return tmp_path


def run_line(line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """One command line of the guide, as a shell would run it here: cp, export, or gesscale in-process."""
    if line.startswith("export "):
        name, _, value = line.removeprefix("export ").partition("=")
        size = re.fullmatch(r"\$\(openssl rand -hex (\d+)\)", value)
        assert size, f"the test knows no way to evaluate {value!r}"
        monkeypatch.setenv(name, secrets.token_hex(int(size.group(1))))
        return ""
    argv = shlex.split(line)
    if argv[0] == "cp":
        src, dst = Path(argv[-2]), Path(argv[-1])
        (shutil.copytree if "-r" in argv else shutil.copyfile)(src, dst)
        return ""
    assert argv[0] == "gesscale", line
    code = main(argv[1:])
    out, err = capsys.readouterr()
    assert code == 0, f"{line}\n{err}"
    return out


def test_the_dry_run_steps_run_as_written(rack: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {line: run_line(line, monkeypatch, capsys) for line in of("dry-run")}
    plan = next(out for line, out in outputs.items() if "--plan" in line)
    assert "token set in the inventory (not shown)" in plan and "MISSING" not in plan  # step 2's export
    assert "k3s_server" in plan and "kafka" in plan
    netem = next(out for line, out in outputs.items() if "netem plan" in line)
    assert "pi01 dev" in netem and " delay " in netem
    assert (rack / "out/k8s/driver.yaml").is_file() and (rack / "out/k8s/controller.yaml").is_file()
    render = next(out for line, out in outputs.items() if "k8s render" in line)
    assert "kubectl apply" in render


def test_the_controller_steps_against_the_fake_api(rack: Path, fake_kube, fake_driver,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Step 7 on the fake cluster (its nodes n1..n5 stand for the Pis, its map for myrack.yaml): the
    recommend-only run changes nothing, the real run reconfigures, and step 8's files are there."""
    build_cluster(fake_kube, fake_driver)
    fake_driver.observations[:] = [{**observation(i, backlog=1000 * i), "held_back": True} for i in range(1, 40)]
    (rack / "inventory/latency/myrack.yaml").write_text(json.dumps(LMAP.to_dict()))
    monkeypatch.setenv("GESSCALE_JOB_TOKEN", "test-token")
    lines = of("fake-api")
    assert len(lines) == 2 and "--recommend-only" in lines[0] and "--recommend-only" not in lines[1]
    for line in lines:
        line = line.replace("http://127.0.0.1:4041", fake_driver.url).replace("--metrics-port 9108",
                                                                                "--metrics-port 0")
        out = run_line(f"{line} --server {fake_kube.url} --app taxi --namespace fog --steps 2 "
                       "--control-period 0.3 --warmup 0", monkeypatch, capsys)
        if "--recommend-only" in line:
            assert "(recommended only)" in out and fake_kube.writes() == []
        else:
            assert "(applied)" in out
    assert json.loads((rack / "out/ctl/state.json").read_text())["policy"] == "gesscale"
    reconfigs = [json.loads(ln) for ln in (rack / "out/ctl/reconfigurations.jsonl").read_text().splitlines()]
    assert reconfigs and reconfigs[0]["nodes"]
