"""CPU budgets on the real cgroup hierarchy of this machine (v1 or v2), and their cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gesscale.errors import UserError
from gesscale.testbed.cgroups import PREFIX, CgroupTree, cgroup_version, process_tree, sweep_stale

BUSY = [sys.executable, "-c", "import os\nos.fork()\nwhile True: pass"]  # two busy processes, parent and child


def _cpu_root() -> Path:
    return Path("/sys/fs/cgroup") if cgroup_version() == 2 else Path("/sys/fs/cgroup/cpu")


def test_budget_throttles_a_process_tree_and_is_removed(cgroup_tree: CgroupTree) -> None:
    budget = cgroup_tree.budget("n1", 0.1)
    proc = subprocess.Popen(BUSY, start_new_session=True)
    try:
        time.sleep(0.3)  # let it fork
        assert budget.add(proc.pid) == 2
        assert sorted(budget.pids()) == sorted(process_tree(proc.pid))
        u0, wall0 = budget.usage_s(), time.monotonic()
        time.sleep(1.0)
        used, wall = budget.usage_s() - u0, time.monotonic() - wall0
        # unthrottled, two busy loops would use up to 2 CPU-s per second; 0.1 core allows 0.1
        assert used < 0.5 * wall
        assert budget.throttled_s() > 0
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    group = budget.dirs[0]
    cgroup_tree.release("n1")
    assert not group.exists()


def test_close_removes_every_group(tmp_path: Path) -> None:
    tree = CgroupTree()
    tree.budget("a", 0.2)
    tree.budget("b", 0.3)
    parents = tree.parents
    assert all(p.exists() for p in parents)
    tree.close()
    tree.close()  # twice is fine
    assert not any(p.exists() for p in parents)


def test_budget_must_be_positive(cgroup_tree: CgroupTree) -> None:
    with pytest.raises(UserError):
        cgroup_tree.budget("bad", 0)


def test_sweep_removes_only_empty_groups_of_dead_owners() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = _cpu_root() / f"{PREFIX}{dead.pid}"
    (stale / "node").mkdir(parents=True)
    alive = _cpu_root() / f"{PREFIX}{os.getpid()}"
    made_alive = not alive.exists()
    alive.mkdir(exist_ok=True)
    try:
        removed = sweep_stale()
        assert stale in removed and not stale.exists()
        assert alive.exists()  # our own (live) group is never swept
    finally:
        if made_alive:
            alive.rmdir()
        if stale.exists():
            (stale / "node").rmdir()
            stale.rmdir()


def test_v2_layout_writes_cpu_max(tmp_path: Path) -> None:
    """The cgroup v2 path on a directory laid out like a cgroup2 mount (this machine runs v1)."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    assert cgroup_version(tmp_path) == 2
    tree = CgroupTree(root=tmp_path)
    # a real cgroup2 mount creates these files itself; here we write the control files like the kernel would
    budget = tree.budget("fog1", 0.25)
    assert (budget.dirs[0] / "cpu.max").read_text() == "25000 100000"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    (budget.dirs[0] / "cpu.stat").write_text("usage_usec 2500000\nthrottled_usec 100\n")
    assert budget.usage_s() == pytest.approx(2.5)
    assert budget.throttled_s() == pytest.approx(0.0001)
    for f in ("cpu.max", "cpu.stat"):
        (budget.dirs[0] / f).unlink()
    (tree.parents[0] / "cgroup.subtree_control").unlink()
    tree.close()
    assert not tree.parents[0].exists()


def test_no_cgroup_controller_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        cgroup_version(tmp_path)
