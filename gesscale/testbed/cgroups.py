"""CPU budgets for local fog nodes through Linux cgroups (v1 `cpu.cfs_quota_us` or v2 `cpu.max`).

A fog node of the local testbed is a Spark worker whose processes (worker JVM, executor JVM, Python workers)
share one cgroup with a CFS quota, e.g. a quarter of a core, so the operator's capacity really grows with the
number of nodes on a 2-core machine (docs/testbed.md). Groups are created under one parent named after the owning
process, `gesscale-testbed-<pid>`, so a later run can remove the empty leftovers of a run that was killed -9
without ever touching groups of a process still alive.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from gesscale.errors import UserError
from netem.userspace.launch import alive

ROOT = Path("/sys/fs/cgroup")
PREFIX = "gesscale-testbed-"
PERIOD_US = 100_000


def cgroup_version(root: Path = ROOT) -> int:
    """2 when `root` is a unified (cgroup2) mount, 1 when it holds a v1 `cpu` hierarchy; UserError otherwise."""
    if (root / "cgroup.controllers").exists():
        return 2
    if (root / "cpu" / "cpu.cfs_quota_us").exists():
        return 1
    raise UserError(f"no usable cgroup CPU controller under {root} (need v1 cpu or v2 cpu.max); "
                    "run as root on Linux")


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except PermissionError:
        raise UserError(f"cannot write {path}: CPU budgets need root") from None
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None


def _pids(procs_file: Path) -> list[int]:
    try:
        return [int(x) for x in procs_file.read_text().split()]
    except (FileNotFoundError, ValueError):
        return []


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc/<pid>/task/*/children)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # the process ended while we looked
        return out
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            out.extend(int(x) for x in (task / "children").read_text().split())
    return out


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants alive now."""
    seen: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        if p in seen or not Path(f"/proc/{p}").exists():
            continue
        seen.append(p)
        todo.extend(_children(p))
    return seen


@dataclass
class CpuBudget:
    """One node's cgroup: a CPU quota (fraction of one core) and its consumed CPU time.

    On v1 the quota lives in the `cpu` hierarchy and the usage in `cpuacct` (both created); on v2 one group
    holds `cpu.max` and `cpu.stat`.
    """

    name: str
    cores: float
    dirs: tuple[Path, ...]
    version: int

    def add(self, pid: int) -> int:
        """Move `pid` and its descendants into the group; returns how many processes moved."""
        moved = 0
        for p in process_tree(pid):
            for d in self.dirs:
                with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                    (d / "cgroup.procs").write_text(str(p))
            moved += 1
        return moved

    def pids(self) -> list[int]:
        """Processes in the group now."""
        return _pids(self.dirs[0] / "cgroup.procs")

    def usage_s(self) -> float:
        """CPU seconds consumed by the group's processes since it was made."""
        if self.version == 1:
            acct = [d for d in self.dirs if d.parent.parent.name == "cpuacct"]
            with contextlib.suppress(OSError, ValueError):
                return int((acct[0] / "cpuacct.usage").read_text()) / 1e9
            return 0.0
        with contextlib.suppress(OSError):
            for line in (self.dirs[0] / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        return 0.0

    def throttled_s(self) -> float:
        """Time the group was held back by its quota (s), as the kernel counts it."""
        key = "throttled_time" if self.version == 1 else "throttled_usec"
        scale = 1e9 if self.version == 1 else 1e6
        with contextlib.suppress(OSError):
            for line in (self.dirs[0] / "cpu.stat").read_text().splitlines():
                k, _, value = line.partition(" ")
                if k == key:
                    return int(value) / scale
        return 0.0


class CgroupTree:
    """The parent group of one testbed run and its per-node budgets; `close()` removes them all."""

    def __init__(self, root: Path = ROOT, owner_pid: int | None = None) -> None:
        self.root = root
        self.version = cgroup_version(root)
        self.owner = owner_pid if owner_pid is not None else os.getpid()
        self.name = f"{PREFIX}{self.owner}"
        sweep_stale(root)
        self.parents = tuple(base / self.name for base in self._bases())
        for p in self.parents:
            try:
                p.mkdir(exist_ok=True)
            except PermissionError:
                raise UserError(f"cannot create cgroup {p}: CPU budgets need root") from None
        if self.version == 2:
            _enable_cpu_v2(self.root, self.parents[0])
        self.budgets: dict[str, CpuBudget] = {}

    def _bases(self) -> list[Path]:
        if self.version == 2:
            return [self.root]
        bases = [self.root / "cpu"]
        if (self.root / "cpuacct" / "cpuacct.usage").exists() and (self.root / "cpuacct") != (self.root / "cpu"):
            bases.append(self.root / "cpuacct")
        return bases

    def budget(self, node: str, cores: float) -> CpuBudget:
        """Create (or return) the group of `node` limited to `cores` cores (0 < cores)."""
        if cores <= 0:
            raise UserError(f"CPU budget of {node} must be > 0 cores, got {cores}")
        if node in self.budgets:
            return self.budgets[node]
        dirs = tuple(p / node for p in self.parents)
        for d in dirs:
            d.mkdir(exist_ok=True)
        quota = max(1000, int(round(cores * PERIOD_US)))
        if self.version == 1:
            _write(dirs[0] / "cpu.cfs_period_us", str(PERIOD_US))
            _write(dirs[0] / "cpu.cfs_quota_us", str(quota))
        else:
            _write(dirs[0] / "cpu.max", f"{quota} {PERIOD_US}")
        budget = CpuBudget(node, cores, dirs, self.version)
        self.budgets[node] = budget
        return budget

    def release(self, node: str, timeout_s: float = 10.0) -> None:
        """Remove the group of `node` (its processes are moved to the root group first if any remain)."""
        budget = self.budgets.pop(node, None)
        if budget is not None:
            for d in reversed(budget.dirs):
                _remove_group(d, timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Remove every group of this run, then the parent; safe to call twice."""
        for node in list(self.budgets):
            self.release(node, timeout_s)
        for p in self.parents:
            if p.exists():
                for child in [c for c in p.iterdir() if c.is_dir()]:
                    _remove_group(child, timeout_s)
                _remove_group(p, timeout_s)


def _enable_cpu_v2(root: Path, parent: Path) -> None:
    for level in (root, parent):
        ctl = level / "cgroup.subtree_control"
        if "cpu" not in (ctl.read_text().split() if ctl.exists() else []):
            _write(ctl, "+cpu")


def _remove_group(d: Path, timeout_s: float) -> None:
    """rmdir a group; leftover processes (should be none) go back to the hierarchy's root first."""
    if not d.exists():
        return
    top = d
    while not top.name.startswith(PREFIX) and top.parent != top:
        top = top.parent
    hierarchy_root = top.parent
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in _pids(d / "cgroup.procs"):
            with contextlib.suppress(OSError):
                (hierarchy_root / "cgroup.procs").write_text(str(pid))
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def sweep_stale(root: Path = ROOT) -> list[Path]:
    """Remove empty testbed groups whose owning process is gone (left by a run killed -9); returns them."""
    removed: list[Path] = []
    try:
        version = cgroup_version(root)
    except UserError:
        return removed
    bases = [root] if version == 2 else [root / "cpu", root / "cpuacct"]
    for base in bases:
        if not base.is_dir():
            continue
        for group in base.glob(PREFIX + "*"):
            suffix = group.name[len(PREFIX):]
            if not suffix.isdigit() or alive(int(suffix)):
                continue
            children = [c for c in group.iterdir() if c.is_dir()]
            if any(_pids(c / "cgroup.procs") for c in children) or _pids(group / "cgroup.procs"):
                continue  # processes still inside: not ours to kill, leave it
            with contextlib.suppress(OSError):
                for c in children:
                    c.rmdir()
                group.rmdir()
                removed.append(group)
    return removed
