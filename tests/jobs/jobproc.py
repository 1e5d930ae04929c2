"""Run `gesscale job run` as a separate process group (so a test can kill -9 the whole driver)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class JobProcess:
    """A `gesscale job run` child in its own session; `kill9` kills the driver, its JVM and Python workers."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._fh = log.open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "gesscale", "job", "run", *args], stdout=self._fh,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})}, start_new_session=True)

    def running(self) -> bool:
        """True while the job has not exited."""
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> int:
        """Wait for the job to end by itself; kill it and fail if it does not."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"job did not stop within {timeout_s} s; log {self.log}") from None
        finally:
            self._fh.close()

    def kill9(self) -> None:
        """SIGKILL the whole process group (the crash of the acceptance test)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._fh.close()


def observations(path: Path) -> list[dict]:
    """The JSON lines the job wrote so far (a partly written last line is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def wait_for(predicate, timeout_s: float, what: str, job: JobProcess | None = None, poll_s: float = 0.2) -> None:  # noqa: ANN001
    """Poll `predicate` until true; fail with `what` on timeout or when the job died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if job is not None and not job.running():
            tail = job.log.read_text(errors="replace")[-4000:]
            raise AssertionError(f"job exited (code {job.proc.returncode}) before {what}; log {job.log}:\n{tail}")
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
