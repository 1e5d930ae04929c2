"""One wrapper for every background process gesscale starts itself: brokers, Spark daemons, the testbed's job.

Callers build a command line and hand it here; this module knows nothing about Kafka, MQTT or Spark. `spawn` starts
the command in its own session (so it outlives the CLI that started it, and its process group holds everything it
starts) with its output in a log file; `ManagedProcess.wait_until` waits until it is ready (a port answers, an API
reports its executors) and fails with the log's last lines if it exits first; `stop` sends SIGTERM, then SIGKILL,
and returns once every thread has ended; `alive` says whether it still runs. A process known only by its PID (from a
state file) is recognised by its command line, so a recycled PID is never signalled. The port helpers check that a
port is free before a start and that it answers after.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gesscale.errors import UserError


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (we can bind it ourselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR: connections left in TIME_WAIT by a stopped broker do not count, a listener does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_answers(port: int, host: str = "127.0.0.1", timeout_s: float = 0.5) -> bool:
    """True when a TCP connection to host:port is accepted."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port(low: int, high: int, host: str = "127.0.0.1") -> int:
    """A port in [low, high] that nothing listens on, tried in a per-process order to avoid collisions."""
    span = high - low + 1
    offset = os.getpid() % span
    for i in range(span):
        port = low + (offset + i) % span
        if port_is_free(port, host):
            return port
    raise UserError(f"no free port between {low} and {high}")


def check_port(port: int, what: str, host: str = "127.0.0.1") -> None:
    """Raise a UserError naming `what` when the port is out of range or already taken."""
    if not 1 <= port <= 65535:
        raise UserError(f"{what} port {port} is not a valid TCP port")
    if not port_is_free(port, host):
        raise UserError(f"{what} port {host}:{port} is already taken (choose another with --{what.lower()}-port)")


def read_cmdline(pid: int) -> list[str] | None:
    """The argv of a running process from /proc, or None when it does not exist (or is a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def is_running(pid: int, argv: list[str]) -> bool:
    """True when `pid` is alive and still runs the command line we started (guards against PID reuse)."""
    return read_cmdline(pid) == argv


def has_exited(pid: int) -> bool:
    """True when every thread of process `pid` has finished (so its sockets are closed), reaped or not.

    An empty `/proc/PID/cmdline` is not enough: it reads empty as soon as the main thread has released its
    memory, while the process's other threads, and with them its file descriptors (a listening socket), may
    live on for a while on a loaded machine. A process has exited when its PID is gone, or when it is a
    zombie whose thread list holds only the main thread.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state not in ("Z", "X"):
        return False
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def group_members(pgid: int) -> list[int]:
    """The PIDs of process group `pgid` that have not exited (zombies excluded), read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            out.append(int(entry))
    return out


def log_tail(path: Path, lines: int = 5) -> str:
    """The last non-empty lines of a log file joined by " | " (for one-line error messages); "" when unreadable."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


@dataclass
class ManagedProcess:
    """A background process we spawned: its PID, exact argv (to recognise it later) and log file.

    `group`: signals reach its whole process group (a daemon with everything it started), not the process alone.
    `owns`: for a process known only by its PID, how to recognise its command line when the exact argv is not known
    (default: equal to `argv`).
    """

    pid: int
    argv: list[str]
    log_path: Path
    _popen: subprocess.Popen | None = None
    group: bool = False
    owns: Callable[[list[str]], bool] | None = None

    def alive(self) -> bool:
        """True while the process runs (and is the one we started)."""
        if self._popen is not None:
            return self._popen.poll() is None
        cmdline = read_cmdline(self.pid)
        return cmdline is not None and self._ours(cmdline)

    def _ours(self, cmdline: list[str]) -> bool:
        return self.owns(cmdline) if self.owns is not None else cmdline == self.argv

    def wait_until(self, ready: Callable[[], bool], what: str, timeout_s: float, poll_s: float = 0.05) -> bool:
        """Poll `ready()` until it holds (True) or `timeout_s` has passed (False).

        Raises a UserError naming `what` with the last lines of the log when the process exits first.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise UserError(f"{what} exited at start-up: {self.log_tail() or 'no output'} (log: {self.log_path})")
            if ready():
                return True
            time.sleep(poll_s)
        return False

    def stop(self, timeout_s: float = 10.0, *, sweep_group: bool = False) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`; idempotent, and never signals a process we did not start.

        Returns once every thread of the process has ended, so its ports no longer answer. `sweep_group`: then
        SIGKILL whatever is left in its process group (the JVM a job started), unless it had ended already.
        """
        if not self.alive():
            self._reap()
            return
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while not self._stopped() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self._exited():
            if self._popen is not None or self._ours_or_exiting():  # never a recycled PID
                self._signal(signal.SIGKILL)
        elif self.group and group_members(self.pid):
            # The leader ended on SIGTERM but something it started did not (it ignores SIGTERM, or is slow): the
            # group's SIGKILL reaches it. The group's id stays reserved while it has members, so this signals
            # only what the process started.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while not self._stopped() and time.monotonic() < deadline:
            time.sleep(0.05)
        if sweep_group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self._reap()

    def _ours_or_exiting(self) -> bool:
        """Ours, or ours while exiting (its command line already released); a child not yet reaped is always ours."""
        cmdline = read_cmdline(self.pid)
        return cmdline is None or self._ours(cmdline)

    def _stopped(self) -> bool:
        """The process has exited and, for a group, so has everything in its group."""
        return self._exited() and not (self.group and group_members(self.pid))

    def _exited(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is not None  # waitpid succeeds only once every thread has ended
        return has_exited(self.pid)

    def kill(self) -> None:
        """SIGKILL at once (used to simulate a crash)."""
        if self.alive():
            self._signal(signal.SIGKILL)
        if self._popen is not None:
            self._popen.wait(timeout=10)

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)

    def _reap(self) -> None:
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=1)
        elif has_exited(self.pid):
            # Started by this process but known only by PID (`broker up` then a failure): collect the zombie.
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(self.pid, os.WNOHANG)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the process's log, for error messages."""
        return log_tail(self.log_path, lines)


def spawn(argv: list[str], log_path: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None,
          group: bool = False, truncate: bool = False) -> ManagedProcess:
    """Start `argv` in a new session with stdout and stderr appended to `log_path` (written afresh: `truncate`).

    `env` replaces the environment when given; `group` as for `ManagedProcess`.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb" if truncate else "ab") as log:
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise UserError(f"binary not found: {argv[0]}") from None
        except OSError as err:
            if err.errno == errno.EACCES:
                raise UserError(f"binary not executable: {argv[0]}") from None
            raise
    return ManagedProcess(pid=popen.pid, argv=argv, log_path=log_path, _popen=popen, group=group)


def wait_until_listening(proc: ManagedProcess, port: int, what: str, timeout_s: float = 30.0,
                         host: str = "127.0.0.1") -> None:
    """Block until host:port answers; on early exit or timeout stop the process and raise a UserError."""
    try:
        if proc.wait_until(lambda: port_answers(port, host), what, timeout_s):
            return
    except UserError:
        proc.stop()  # exited: only reaps it
        raise
    proc.stop()
    raise UserError(f"{what} did not answer on port {port} within {timeout_s:.0f} s (log: {proc.log_path})")
