"""Running the project's playbooks through ansible-runner, with live progress and a per-host recap.

Used by `gesscale provision` (site/reset/...) and by `gesscale netem apply|clear --via ansible`. Runs
`ansible-playbook` from the same Python environment as gesscale, so the playbooks' filter plugins import the
same `netem` code as the fabric path.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gesscale.errors import UserError

PLAYBOOK_DIR = Path(__file__).resolve().parents[1] / "playbooks"
PLAYBOOKS = ("site", "netem", "measure", "reset")
RECAP_KEYS = ("ok", "changed", "failures", "dark", "skipped")


@dataclass
class HostRecap:
    """Per-host counts of the PLAY RECAP line."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0


@dataclass
class PlaybookResult:
    """Outcome of one playbook run: exit status, recap per host, and the failure messages seen."""

    rc: int
    status: str
    recap: dict[str, HostRecap] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # "host: task" of every changed result

    @property
    def ok(self) -> bool:
        """True when ansible-playbook succeeded."""
        return self.rc == 0

    @property
    def changed(self) -> int:
        """Changed tasks summed over hosts (0 on an idempotent re-run)."""
        return sum(r.changed for r in self.recap.values())


Progress = Callable[[str, str, str], None]  # (kind, host, text) -> None


def playbook_path(name: str) -> Path:
    """The path of one of the project's playbooks, by short name (site, netem, measure, reset) or path."""
    p = PLAYBOOK_DIR / f"{name}.yml" if name in PLAYBOOKS else Path(name)
    if not p.is_file():
        raise UserError(f"playbook not found: {name} (choose one of {', '.join(PLAYBOOKS)} or give a path)")
    return p.resolve()


def parse_extra_vars(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line into a dict; a malformed one is a `UserError`."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"extra variable {pair!r} must look like KEY=VALUE")
        out[key.strip()] = value
    return out


def _recap_from_stats(data: Mapping[str, Any]) -> dict[str, HostRecap]:
    hosts: dict[str, HostRecap] = {}
    for key, field_name in zip(RECAP_KEYS, ("ok", "changed", "failed", "unreachable", "skipped"), strict=True):
        for host, count in (data.get(key) or {}).items():
            setattr(hosts.setdefault(host, HostRecap()), field_name, int(count))
    return hosts


def run_playbook(
    playbook: str,
    inventory: str | Path,
    *,
    tags: str | None = None,
    skip_tags: str | None = None,
    limit: str | None = None,
    extra_vars: Mapping[str, Any] | None = None,
    vault_password_file: str | None = None,
    check: bool = False,
    progress: Progress | None = None,
    timeout_s: int | None = None,
    extra_vars_files: tuple[str, ...] = (),
) -> PlaybookResult:
    """Run one playbook against an inventory; `progress(kind, host, text)` sees each task and host result.

    `extra_vars_files`: YAML (or ansible-vault) files of variables, passed as `-e @FILE` (secrets by file:
    their values never appear on a command line)."""
    import ansible_runner  # heavy: imported only when a playbook runs

    path = playbook_path(playbook)
    inv = Path(inventory)
    if not inv.exists():
        raise UserError(f"inventory not found: {inv}")
    if vault_password_file and not Path(vault_password_file).is_file():
        raise UserError(f"vault password file not found: {vault_password_file}")
    cmdline = []
    if tags:
        cmdline += ["--tags", tags]
    if skip_tags:
        cmdline += ["--skip-tags", skip_tags]
    if vault_password_file:
        cmdline += ["--vault-password-file", str(Path(vault_password_file).resolve())]
    if check:
        cmdline += ["--check", "--diff"]
    for vars_file in extra_vars_files:
        cmdline += ["-e", "@" + str(Path(vars_file).resolve())]
    bindir = str(Path(sys.executable).parent)
    envvars = {
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_PIPELINING": "True",  # one SSH round trip per task instead of three
        "ANSIBLE_SSH_CONTROL_PATH_DIR": os.path.join(tempfile.gettempdir(), f"gesscale-cp-{os.getuid()}"),
        "ANSIBLE_FORCE_COLOR": "False",
        "ANSIBLE_NOCOLOR": "True",
        # ansible-runner turns host key checking off unless told: unknown or changed keys must stop the run
        # (learned once: `gesscale provision --learn-host-keys`, netem/known_hosts.py)
        "ANSIBLE_HOST_KEY_CHECKING": "True",
    }
    failures: list[str] = []
    changes: list[str] = []

    def on_event(event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host", "")
        if kind == "playbook_on_play_start":
            _emit(progress, "play", "", data.get("play", ""))
        elif kind == "playbook_on_task_start":
            _emit(progress, "task", "", data.get("task", ""))
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"):
            res = data.get("res") or {}
            state = {"runner_on_failed": "failed", "runner_on_unreachable": "unreachable",
                     "runner_on_skipped": "skipped"}.get(kind, "changed" if res.get("changed") else "ok")  # fmt: skip
            if state == "changed":
                changes.append(f"{host}: {data.get('task', '')}")
            if state in ("failed", "unreachable") and not data.get("ignore_errors"):
                msg = str(res.get("msg") or res.get("stderr") or "").strip()
                failures.append(f"{host}: {data.get('task', '')}: {msg}")
            _emit(progress, state, host, str(res.get("msg") or "") if state in ("failed", "unreachable") else "")
        return True

    with tempfile.TemporaryDirectory(prefix="gesscale-runner-") as private:
        runner = ansible_runner.run(
            private_data_dir=private,
            playbook=str(path),
            inventory=str(inv.resolve()),
            extravars=dict(extra_vars or {}),
            envvars=envvars,
            cmdline=" ".join(shlex.quote(c) for c in cmdline) or None,
            limit=limit,
            quiet=True,
            event_handler=on_event,
            suppress_env_files=True,
            timeout=timeout_s,
        )
        stats = runner.stats or {}
        if runner.rc != 0 and not stats:
            # ansible-playbook stopped before any play ran (bad inventory, syntax error): show its words.
            text = runner.stdout.read() if runner.stdout else ""
            failures.append(text.strip()[-2000:])
    return PlaybookResult(runner.rc, runner.status, _recap_from_stats(stats), failures, changes)


def _emit(progress: Progress | None, kind: str, host: str, text: str) -> None:
    if progress is not None:
        progress(kind, host, text)
