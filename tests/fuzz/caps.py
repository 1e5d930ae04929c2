"""Each fuzzed example runs capped: a wall-clock alarm (2 s) and an address-space limit (256 MB above what the
process already maps), so a hang or a runaway allocation is a failing example, not a stuck CI job."""

from __future__ import annotations

import resource
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

SECONDS = 2.0
EXTRA_BYTES = 256 * 2**20


class Hang(BaseException):
    """An example ran past its time cap (a BaseException, so that no `except Exception` swallows it)."""


def _mapped_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@contextmanager
def capped(seconds: float = SECONDS, extra_bytes: int = EXTRA_BYTES) -> Iterator[None]:
    """Run the block with at most `seconds` of wall time and `extra_bytes` more address space; the caps of the
    surrounding test (pytest-timeout's alarm, the process's limit) are restored afterwards."""

    def on_alarm(_signum: int, _frame: FrameType | None) -> None:
        raise Hang(f"example still running after {seconds:g} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped_bytes() + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, old_delay - (time.monotonic() - started)))
