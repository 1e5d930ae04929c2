"""The record of which brokers `gesscale broker up` started: `<data-dir>/brokers.json`.

It holds each broker's PID and exact argv, so `down` stops only processes we started (a PID whose command line
differs — reused by another program — is left alone) and `status` can tell running from gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gesscale.process import is_running

STATE_FILE = "brokers.json"


@dataclass
class BrokerRecord:
    """One started broker: what (`kafka`/`mqtt`), which implementation, where, and its process identity."""

    role: str
    impl: str
    port: int
    pid: int
    argv: list[str]
    data_dir: str
    log: str
    conformance: dict[str, bool] = field(default_factory=dict)

    def running(self) -> bool:
        """True when the recorded PID still runs the recorded command line."""
        return is_running(self.pid, self.argv)


def load(data_dir: Path) -> dict[str, BrokerRecord]:
    """The brokers recorded under `data_dir` by role (empty when none)."""
    path = data_dir / STATE_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}
    return {role: BrokerRecord(**rec) for role, rec in raw.items()}


def save(data_dir: Path, records: dict[str, BrokerRecord]) -> None:
    """Write the records (removing the file when there are none)."""
    path = data_dir / STATE_FILE
    if not records:
        path.unlink(missing_ok=True)
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({role: asdict(rec) for role, rec in records.items()}, indent=2))
    tmp.replace(path)
