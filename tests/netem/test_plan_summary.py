"""`gesscale netem plan`'s summary says what each leaf applies: jitter and loss in netem mode, no delay in
structural mode (whose pfifo leaves delay nothing)."""

from __future__ import annotations

import pytest

from gesscale.cli import main

ARGS = ["netem", "plan", "-i", "inventory/pi10", "-m", "inventory/latency/pi10-degraded.yaml", "--at", "5000",
        "--engine", "kernel"]


def peer_line(out: str, node: str, peer: str) -> str:
    block = out.split(f"{node} dev ")[1]
    return next(line for line in block.splitlines() if line.strip().startswith(f"-> {peer} "))


def test_netem_summary_shows_jitter_and_loss(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    from tests.fixtures.paths import ROOT

    monkeypatch.chdir(ROOT)
    assert main(ARGS) == 0
    line = peer_line(capsys.readouterr().out, "pi01", "pi03")  # the degraded link after t = 4320 s
    assert "delay 79.35 ms" in line and "jitter 5 ms" in line and "loss 1 %" in line


def test_structural_summary_shows_no_delay(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    from tests.fixtures.paths import ROOT

    monkeypatch.chdir(ROOT)
    assert main([*ARGS, "--mode", "structural"]) == 0
    out = capsys.readouterr().out
    line = peer_line(out, "pi01", "pi03")
    assert "no delay" in line and "ms" not in line


def test_a_map_with_fog_events_is_planned_with_a_warning_that_they_are_not_applied(
        capsys: pytest.CaptureFixture[str], monkeypatch, tmp_path) -> None:
    import yaml

    from tests.fixtures.paths import ROOT

    monkeypatch.chdir(ROOT)
    data = yaml.safe_load((ROOT / "inventory/latency/pi10-degraded.yaml").read_text())
    data["changes"].append({"t_s": 5000, "event": "crash", "node": "pi02"})
    path = tmp_path / "events.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main([*ARGS[:5], str(path), *ARGS[6:]]) == 0
    err = capsys.readouterr().err
    assert "1 fog event(s) (crash) in changes: are not applied by `gesscale netem`" in err
