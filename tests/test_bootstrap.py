"""`make setup` without root: the Debian packages are skipped with a note (the simulator needs none), never a
sudo prompt or a failure; as root they are installed. apt-get and sudo are stand-ins here (no package is really
installed); the user switch is real (runuser to nobody)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.paths import ROOT

SCRIPT = ROOT / "scripts" / "debian-packages.sh"


def bin_dir(tmp_path: Path) -> Path:
    """A PATH with `id`, a sudo that refuses, and an apt-get that records its call: java & co. are missing."""
    b = tmp_path / "bin"
    b.mkdir()
    os.symlink(shutil.which("id"), b / "id")
    (b / "sudo").write_text("#!/bin/sh\nexit 1\n")
    (b / "apt-get").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/apt.log\n")
    for f in ("sudo", "apt-get"):
        (b / f).chmod(0o755)
    tmp_path.chmod(0o777)
    return b


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to become nobody")
def test_without_root_the_packages_are_skipped_with_a_note(tmp_path: Path) -> None:
    b = bin_dir(tmp_path)
    argv = [str(shutil.which("runuser")), "-u", "nobody", "--", "/bin/bash", str(SCRIPT)]
    r = subprocess.run(argv, capture_output=True, text=True, env={"PATH": str(b)}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "not root" in r.stdout and "skipping the Debian packages" in r.stdout and "openjdk" in r.stdout
    assert not (tmp_path / "apt.log").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the root path")
def test_as_root_the_missing_packages_are_installed(tmp_path: Path) -> None:
    b = bin_dir(tmp_path)
    r = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, env={"PATH": str(b)},
                       timeout=60)
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "apt.log").read_text()
    assert "update" in log and "install" in log and "openjdk-17-jre-headless" in log
