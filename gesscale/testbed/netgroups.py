"""Per-node cgroup-v2 groups that tell the testbed's fog nodes apart on the network (gesscale.testbed.wan_plan).

The CPU budgets live in the v1 `cpu` hierarchy on a hybrid host (gesscale.testbed.cgroups); these groups live in
the unified (v2) hierarchy beside it, with the same names (`gesscale-testbed-<owner pid>/<node>`), and only
group processes: no controller is enabled. A node's worker daemon joins its group before it starts, so every
process the worker launches, and every socket those open, belongs to it from the first packet.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from gesscale.errors import UserError
from gesscale.testbed.cgroups import PREFIX, sweep_stale


def unified_root(mounts: str | None = None) -> Path | None:
    """Where the cgroup-v2 hierarchy is mounted (None when it is not)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            return Path(parts[1])
    return None


def cpu_is_v1(root: Path = Path("/sys/fs/cgroup")) -> bool:
    """True on a hybrid host: the CPU controller is in a v1 hierarchy, so the v2 tree is free for grouping."""
    return (root / "cpu" / "cpu.cfs_quota_us").exists()


class NetGroups:
    """One v2 group per fog node under `gesscale-testbed-<owner>`; `close()` removes them."""

    def __init__(self, owner_pid: int, nodes: list[str], root: Path | None = None) -> None:
        found = root or unified_root()
        if found is None or not cpu_is_v1():
            raise UserError("WAN emulation on the testbed needs a host whose CPU controller is in cgroup v1 with the "
                            "unified (v2) hierarchy mounted beside it (a hybrid layout, as on this project's CI); "
                            "run without --wan here")
        self.root = found
        sweep_stale(self.root)
        self.parent_name = f"{PREFIX}{owner_pid}"
        self.parent = self.root / self.parent_name
        self.nodes = list(nodes)
        try:
            for node in self.nodes:
                (self.parent / node).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create cgroup {self.parent}: {err.strerror} (WAN emulation needs root)") from None

    @classmethod
    def attach(cls, parent: Path) -> NetGroups:
        """The groups another process made (a controller joining a running testbed)."""
        groups = cls.__new__(cls)
        groups.root = parent.parent
        groups.parent_name = parent.name
        groups.parent = parent
        groups.nodes = sorted(p.name for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
        return groups

    def procs_file(self, node: str) -> Path:
        """The file a process writes `0` into to join `node`'s group."""
        return self.parent / node / "cgroup.procs"

    def pids(self, node: str) -> list[int]:
        """Processes in `node`'s group now."""
        try:
            return [int(x) for x in self.procs_file(node).read_text().split()]
        except (OSError, ValueError):
            return []

    def close(self, timeout_s: float = 10.0) -> None:
        """Remove the groups (a process still inside goes back to the root group first); safe to call twice."""
        if not self.parent.exists():
            return
        deadline = time.monotonic() + timeout_s
        for d in [*(c for c in self.parent.iterdir() if c.is_dir()), self.parent]:
            while d.exists():
                for pid in self.pids(d.name) if d != self.parent else []:
                    with contextlib.suppress(OSError):
                        (self.root / "cgroup.procs").write_text(str(pid))
                try:
                    d.rmdir()
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
