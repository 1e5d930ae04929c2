"""What produced a result: package versions, git commit, machine facts, and a hash of the input trace.

Recorded in every bundle so that a reader can tell which code, on which machine, over which input made a figure.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

PACKAGES = ("gesscale", "numpy", "scipy", "networkx", "matplotlib", "typer", "rich", "pyyaml", "pyspark")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (None when absent)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_facts(repo: Path) -> dict[str, Any]:
    """The commit checked out in `repo` and whether the work tree had changes (None when not a git checkout)."""
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20,
                               check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip() if commit else None,
            "modified_files": None if status is None else len(status.splitlines())}


def machine_facts() -> dict[str, Any]:
    """OS, CPU and memory of this machine, and the Python running."""
    mem_kb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "memory_mb": None if mem_kb is None else mem_kb // 1024,
            "python": sys.version.split()[0]}


def sha256_of_array(values: np.ndarray) -> str:
    """SHA-256 of a series' float64 bytes: the same input gives the same hash on any machine."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f8").tobytes()).hexdigest()


def sha256_of_file(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def environment_record(repo: Path, argv: list[str]) -> dict[str, Any]:
    """Everything `environment.json` holds but the input hashes: when, what command, which code, which machine."""
    return {"created_utc": datetime.now(UTC).isoformat(timespec="seconds"), "command": argv,
            "git": git_facts(repo), "packages": package_versions(), "machine": machine_facts()}
