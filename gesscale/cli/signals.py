"""SIGTERM handled as Ctrl-C by the commands that own live resources (a testbed, a controller, an experiment).

Python turns SIGINT into KeyboardInterrupt, so each command's `finally` tears down what it started; SIGTERM's
default is an abrupt exit that skips it, leaving brokers, Spark daemons, delay daemons and iptables rules behind.
A process started in the background by a non-interactive shell (`nohup ... &`) even ignores SIGINT, so SIGTERM
(`kill PID`, a service manager, a CI timeout) is the only polite way to stop it.
"""

from __future__ import annotations

import contextlib
import signal


def sigterm_as_interrupt() -> None:
    """From now on SIGTERM raises KeyboardInterrupt in the main thread (a no-op outside it)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread: signals cannot be set there
        signal.signal(signal.SIGTERM, handler)
