"""The one process wrapper (gesscale/process.py): its group signals, the sweep of what a process left, SIGKILL
after the grace period, recognising a process known by PID, and waiting until ready. Plain Python children stand
in for brokers, Spark daemons and the job (their own tests start the real ones)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.process import ManagedProcess, has_exited, read_cmdline, spawn

# A parent that starts a child in its own process group, then sleeps; the child writes its PID once it ignores
# SIGTERM (so a test never races its signal set-up), then sleeps. With `ignore`, the parent ignores SIGTERM too;
# the child always does (only SIGKILL stops it).
PARENT = """
import signal, subprocess, sys, time
if sys.argv[2] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1]); "
    "time.sleep(60)", sys.argv[1]])
time.sleep(60)
"""


def _start(tmp_path: Path, *, group: bool, parent: str = "plain") -> tuple[ManagedProcess, int]:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    pid_file = tmp_path / "child.pid"
    proc = spawn([sys.executable, str(script), str(pid_file), parent], tmp_path / "parent.log", group=group)
    assert proc.wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", "parent", 20.0)
    return proc, int(pid_file.read_text())


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if has_exited(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_group_stop_reaches_what_the_process_started(tmp_path: Path) -> None:
    proc, child = _start(tmp_path, group=True)
    proc.stop(timeout_s=0.5)  # the child ignores SIGTERM: the group's SIGKILL ends it
    assert not proc.alive() and _gone(child)


def test_sweep_group_kills_what_the_process_left(tmp_path: Path) -> None:
    proc, child = _start(tmp_path, group=False)
    proc.stop(timeout_s=5.0, sweep_group=True)  # SIGTERM to the parent only; then the sweep
    assert not proc.alive() and _gone(child)


def test_without_group_or_sweep_only_the_process_is_stopped(tmp_path: Path) -> None:
    proc, child = _start(tmp_path, group=False)
    proc.stop(timeout_s=5.0)
    try:
        assert not proc.alive() and not has_exited(child)
    finally:
        ManagedProcess(child, [], tmp_path / "none", owns=lambda argv: True).kill()
        assert _gone(child)


def test_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    proc, child = _start(tmp_path, group=True, parent="ignore")
    t0 = time.monotonic()
    proc.stop(timeout_s=0.3)
    assert not proc.alive() and _gone(child) and time.monotonic() - t0 < 5.0


def test_a_process_known_by_pid_is_recognised_by_its_command_line(tmp_path: Path) -> None:
    started = spawn([sys.executable, "-c", "import time; time.sleep(60)", "marker-7"], tmp_path / "sleep.log")
    try:
        # right after the fork the child still shows this test's command line; wait until it runs its own
        assert started.wait_until(lambda: read_cmdline(started.pid) == started.argv, "sleeper", 20.0)
        assert ManagedProcess(started.pid, started.argv, started.log_path).alive()
        assert ManagedProcess(started.pid, [], started.log_path, owns=lambda argv: "marker-7" in argv).alive()
        stranger = ManagedProcess(started.pid, ["another", "command"], started.log_path)
        assert not stranger.alive()
        stranger.stop(timeout_s=0.2)  # not ours (a recycled PID, as far as it can tell): never signalled
        assert started.alive()
    finally:
        started.stop()
    assert not started.alive()


def test_wait_until_fails_with_the_log_when_the_process_exits(tmp_path: Path) -> None:
    proc = spawn([sys.executable, "-c", "print('bad config line 3'); raise SystemExit(3)"], tmp_path / "x.log")
    with pytest.raises(UserError, match="the thing exited at start-up: bad config line 3"):
        proc.wait_until(lambda: False, "the thing", 20.0)


def test_wait_until_is_false_after_the_timeout(tmp_path: Path) -> None:
    proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "y.log")
    try:
        assert proc.wait_until(lambda: False, "sleeper", 0.2) is False
    finally:
        proc.stop()


def test_truncate_writes_the_log_afresh(tmp_path: Path) -> None:
    log = tmp_path / "z.log"
    log.write_text("old run\n")
    spawn([sys.executable, "-c", "print('new run')"], log, truncate=True)._popen.wait(20)  # type: ignore[union-attr]
    assert log.read_text() == "new run\n"
