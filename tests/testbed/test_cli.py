"""User mistakes of `gesscale run` and `gesscale demo` end as one line on stderr with exit code 2, before
anything is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from gesscale.cli import main


@pytest.mark.parametrize("argv", [
    ["run", "--backend", "k8s"],
    ["run", "--strategy", "sideways"],
    ["run", "--policy", "no-such-policy"],
    ["run", "--control-period", "soon"],
    ["run", "--control-period", "0s"],
    ["demo", "--nodes", "12"],
    ["demo", "--node-cpu", "2"],
    ["demo", "--strategy", "sideways"],
    ["demo", "--policy", "no-such-policy"],
    ["demo", "--policies", "gesscale,nope"],
    ["run", "--latency-source", "sometimes"],
    ["run", "--latency-source", "measured", "--no-wan"],
    ["demo", "--latency-source", "both", "--no-wan"],
    ["run", "--events", "{events}", "--no-wan"],
    ["run", "--events", "{events}", "--testbed", "{tmp}"],
    ["run", "--events", "{bad_events}"],
    ["demo", "--events", "{bad_events}"],
    ["demo", "--events", "{events}", "--no-wan"],
])
def test_bad_flags_are_user_errors(argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "events.yaml").write_text("- {t_s: 30, node: fog1, add_rtt_ms: 60}\n")
    (tmp_path / "bad.yaml").write_text("- {t_s: 30, event: partition, pairs: [[fog1, nowhere]]}\n")
    files = {"events": str(tmp_path / "events.yaml"), "bad_events": str(tmp_path / "bad.yaml"), "tmp": str(tmp_path)}
    argv = [a.format(**files) for a in argv]
    if argv[0] == "demo":
        argv = [*argv, "--out", str(tmp_path / "demo")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gesscale: error:") and "\n" not in err
    assert not (tmp_path / "demo" / "testbed").exists()


def test_attach_to_a_missing_testbed_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--testbed", str(tmp_path / "nothing"), "--metrics-port", "0"]) == 2
    assert "no testbed" in capsys.readouterr().err


def test_help_describes_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("run", "demo"):
        assert main([cmd, "--help"]) == 0
        out = capsys.readouterr().out
        assert "--strategy" in out and "--node-cpu" in out
