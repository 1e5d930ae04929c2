"""ansible-lint (production profile, offline) and `ansible-playbook --syntax-check` on every playbook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOKS = sorted((ROOT / "playbooks").glob("*.yml"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_ROLES_PATH"] = str(ROOT / "playbooks" / "roles")
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def test_every_playbook_is_listed():
    assert {p.stem for p in PLAYBOOKS} >= {"site", "netem", "measure", "reset"}


@pytest.mark.parametrize("inventory", ["pi10", "local"])
def test_syntax_check(inventory):
    # One ansible-playbook call checks all playbooks (it accepts several); it fails if any one is wrong.
    res = subprocess.run(
        [BIN / "ansible-playbook", "--syntax-check", "-i", ROOT / "inventory" / inventory, *PLAYBOOKS],
        capture_output=True, text=True, cwd=ROOT, env=_env(),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr


def test_ansible_lint_is_clean():
    res = subprocess.run(
        [BIN / "ansible-lint", "--offline", "--nocolor", "--format=pep8", "playbooks", "inventory/pi10",
         "inventory/local"],
        capture_output=True, text=True, cwd=ROOT, env=_env(),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Passed" in res.stdout + res.stderr
