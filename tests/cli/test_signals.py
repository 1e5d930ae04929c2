"""SIGTERM reaches the commands that own live resources as Ctrl-C does (gesscale/cli/signals.py), so their
`finally` tears the testbed down; `experiment run` once left a broker, Spark daemons, a delay daemon and 83
iptables rules behind on `kill PID` (its background shell ignored SIGINT)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from gesscale.cli.signals import sigterm_as_interrupt


def test_sigterm_raises_keyboard_interrupt_in_the_main_thread() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        sigterm_as_interrupt()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 1.0)  # let the handler run
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_background_command_with_sigint_ignored_still_runs_its_finally_on_sigterm(tmp_path) -> None:
    # as `nohup gesscale experiment run ... &` from a script: SIGINT ignored, SIGTERM the only polite stop
    marker = tmp_path / "torn-down"
    code = textwrap.dedent(f"""
        import signal, sys, time
        from gesscale.cli.signals import sigterm_as_interrupt
        sigterm_as_interrupt()
        try:
            print("ready", flush=True)
            time.sleep(30)
        except KeyboardInterrupt:
            pass
        finally:
            open({str(marker)!r}, "w").write("ok")
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert marker.read_text() == "ok"


@pytest.mark.parametrize("module", ["cmd_calibrate", "cmd_run", "cmd_demo", "cmd_experiment"])
def test_every_live_command_installs_it(module: str) -> None:
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(f"gesscale.cli.{module}"))
    assert "sigterm_as_interrupt()" in source
