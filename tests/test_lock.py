"""The dependency lock: uv.lock and requirements-lock.txt match pyproject.toml (CI fails when they are stale), and
the environment the tests run in holds exactly the locked versions."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK_FILES = ("pyproject.toml", "README.md", "uv.lock", "requirements-lock.txt", "scripts/lock.sh")


def _uv() -> str:
    """The uv that bootstrap installed into the environment (a pip-only install has none)."""
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        pytest.skip("uv is not installed (pip fallback install): the lock cannot be checked here")
    return found


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/lock.sh", "--check"], cwd=root, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "UV": _uv(), "HOME": str(Path.home())})


def _copy(tmp_path: Path) -> Path:
    for name in LOCK_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def _locked_pins() -> dict[str, str]:
    """Name -> version of every line of requirements-lock.txt whose marker holds on this interpreter."""
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements-lock.txt").read_text().splitlines():
        if not line or line[0] in " #-":
            continue
        req = Requirement(line.rstrip(" \\"))
        if req.marker is None or req.marker.evaluate():
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_lock_matches_pyproject() -> None:
    done = _check(ROOT)
    assert done.returncode == 0, done.stderr


def test_a_dependency_added_to_pyproject_makes_the_check_fail(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"pyyaml>=6",', '"pyyaml>=6",\n  "tomli-w>=1",'))
    done = _check(root)
    assert done.returncode == 1
    assert "uv.lock is stale" in done.stderr


def test_an_edited_requirements_export_makes_the_check_fail(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    export = root / "requirements-lock.txt"
    export.write_text(export.read_text().replace("\ntyper==", "\ntyper==0.0.1\nnot-typer==", 1))
    done = _check(root)
    assert done.returncode == 1
    assert "requirements-lock.txt is not the export of uv.lock" in done.stderr


def test_lock_covers_every_declared_dependency_and_the_dev_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    pins = _locked_pins()
    for req in declared:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements-lock.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} breaks {req}"


def test_installed_versions_are_the_locked_ones() -> None:
    pins = _locked_pins()
    wrong = {}
    for name, version in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (installed, version)
    assert not wrong, f"installed vs locked (run `make setup`): {wrong}"
