"""`gesscale calibrate --backend local`: user mistakes end as one line on stderr with exit code 2, before any
testbed process is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from gesscale.cli import main


@pytest.mark.parametrize(("argv", "message"), [
    (["--backend", "k8s"], "not available"),
    (["--node-cpu", "2"], "--node-cpu"),
    (["--tolerance", "1.5"], "--tolerance"),
    (["--max-steps", "0"], "--max-steps"),
    (["--observe-s", "0"], "--observe-s"),
    (["--replicas", "1,x"], "--replicas"),
    (["--replicas", "10"], "cannot place 10 replicas"),
    (["--placements", "nearby"], "unknown placement"),
    (["--max-rows-per-batch", "1"], "--max-rows-per-batch"),
    (["--out", "{tmp}"], "is a directory"),
])
def test_local_calibration_mistakes_are_user_errors(argv: list[str], message: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(tmp=tmp_path) for a in argv]
    base = ["calibrate", "--backend", "local", "--run-dir", str(tmp_path / "tb"), "--out", str(tmp_path / "m.json")]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gesscale: error:") and message in err and "\n" not in err
    assert not (tmp_path / "tb").exists()


def test_help_names_both_backends_and_the_live_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--backend", "--job-warmup-s", "--cooldown-s", "--port-shift", "--node-cpu"):
        assert flag in out
    assert "local" in out and "sim" in out
    from gesscale.testbed.probe_target import LIVE_PARAMS

    flat = " ".join(out.replace("│", " ").split())
    p = LIVE_PARAMS
    for text in (f"sim 60, local {p.observe_s:g})", f"sim 60, local {p.inject_s:g})",
                 f"sim 30, local {p.cooldown_s:g})", f"local {p.tolerance:g} for both",
                 f"local {p.precision:g})", f"sim 20, local {p.max_steps})"):
        assert text in flat, text  # the help states the live defaults the code uses
