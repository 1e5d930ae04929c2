"""How the delay daemon is started and where it keeps its state: one place for every caller.

A daemon is started with `python -m netem.userspace --config FILE --tag gesscale-netem:TAG`. The tag is an
argument of its own, so cleanup finds a daemon by its command line (`daemon_pids`), never by a PID that may
have been recycled. Beside the config file it writes `<stem>.pid` (while it runs) and `<stem>.stats.json`
(its packet counters, refreshed twice a second), which `netem.userspace.health` reads.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LABEL_PREFIX = "gesscale-netem:"
LABEL_PATTERN = re.compile(r"^gesscale-netem:[A-Za-z0-9_.:-]{1,60}$")
MODULE = "netem.userspace"


def daemon_argv(config: str | Path, label: str) -> list[str]:
    """Arguments after the Python interpreter that start a daemon for `config`, labelled `label`."""
    if not LABEL_PATTERN.match(label):
        raise ValueError(f"daemon label {label!r} must look like gesscale-netem:TAG")
    return ["-m", MODULE, "--config", str(config), "--tag", label]


def pid_file(config: str | Path) -> Path:
    """The daemon's PID file, beside its config."""
    p = Path(config)
    return p.with_name(p.stem + ".pid")


def stats_file(config: str | Path) -> Path:
    """The daemon's counters (JSON), beside its config."""
    p = Path(config)
    return p.with_name(p.stem + ".stats.json")


def daemon_pids(label: str, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of the delay daemons whose command line carries exactly `label` (in this PID namespace)."""
    found = []
    want = label.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if MODULE.encode() in argv and want in argv:
            found.append(int(entry.name))
    return sorted(found)


def alive(pid: int) -> bool:
    """Whether a process with this PID exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
