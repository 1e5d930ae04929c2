"""SSH host keys learned once and checked after: the known_hosts file of an inventory.

Trust on first use, done deliberately: `gesscale provision --learn-host-keys` scans each host's keys with
`ssh-keyscan` and records them in the inventory's known_hosts file (the host variable `ssh_known_hosts_file`,
default `<inventory folder>/known_hosts`), printing each fingerprint so that it can be compared with the one
the host shows on its console (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`). A host already recorded
with other keys is not overwritten: a changed key is reported, and only removing its lines by hand (after
checking why it changed) lets it be learned again. Afterwards both the fabric path (`netem.remote`) and
Ansible (`StrictHostKeyChecking=yes` with this file) refuse an unknown or changed key.

`merge` is pure; `scan` and `learn` do the I/O.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gesscale.errors import UserError

DEFAULT_NAME = "known_hosts"
KEY_TYPES = "ed25519,ecdsa,rsa"


def host_pattern(host: str, port: int = 22) -> str:
    """The host field OpenSSH and paramiko look up: `host`, or `[host]:port` for another port."""
    return host if port == 22 else f"[{host}]:{port}"


def parse(text: str) -> dict[str, set[tuple[str, str]]]:
    """known_hosts text -> host pattern -> {(key type, base64 key)}; comments, markers and hashed names kept out."""
    out: dict[str, set[tuple[str, str]]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[0].startswith("#") or fields[0].startswith("@"):
            continue
        for name in fields[0].split(","):
            out.setdefault(name, set()).add((fields[1], fields[2]))
    return out


@dataclass(frozen=True)
class Merge:
    """What learning would do: lines to append, hosts already known with the same keys, hosts whose key changed."""

    new_lines: list[str]
    unchanged: list[str]
    changed: list[str]


def merge(existing: str, scanned: dict[str, str]) -> Merge:
    """Combine a known_hosts text with freshly scanned keys (host pattern -> ssh-keyscan output).

    A host absent from `existing` gets its scanned lines; a host present whose recorded keys share a
    (type, key) pair with the scan is unchanged; a host present with none in common has changed (never
    overwritten here). A scan that returned no key is an error for that host (raised by `learn`).
    """
    known = parse(existing)
    new_lines: list[str] = []
    unchanged: list[str] = []
    changed: list[str] = []
    for pattern, output in scanned.items():
        keys = parse(output).get(pattern, set())
        if pattern not in known:
            new_lines += [f"{pattern} {kind} {key}" for kind, key in sorted(keys)]
        elif known[pattern] & keys:
            unchanged.append(pattern)
        else:
            changed.append(pattern)
    return Merge(new_lines, unchanged, changed)


def scan(host: str, port: int = 22, timeout_s: int = 5) -> str:
    """`ssh-keyscan` output for one host ('' when it answered with no key)."""
    try:
        res = subprocess.run(["ssh-keyscan", "-T", str(timeout_s), "-p", str(port), "-t", KEY_TYPES, host],
                             capture_output=True, text=True, timeout=timeout_s * 4 + 5)
    except FileNotFoundError:
        raise UserError("ssh-keyscan not found (install openssh-client)") from None
    except subprocess.TimeoutExpired:
        return ""
    return res.stdout


def fingerprints(lines: Iterable[str]) -> list[str]:
    """`ssh-keygen -lf` of known_hosts lines: `bits SHA256:... host (TYPE)` per key."""
    text = "".join(f"{line}\n" for line in lines)
    if not text:
        return []
    res = subprocess.run(["ssh-keygen", "-lf", "-"], input=text, capture_output=True, text=True, timeout=30)
    return [line for line in res.stdout.splitlines() if line.strip()]


def learn(targets: dict[str, tuple[str, int]], path: Path) -> Merge:
    """Scan every target (inventory name -> (address, port)) and append new keys to `path` (mode 0600).

    Refuses (UserError, nothing written) when a host does not answer or when a recorded key changed.
    """
    scanned: dict[str, str] = {}
    silent = []
    for name, (address, port) in targets.items():
        pattern = host_pattern(address, port)
        out = scan(address, port)
        if not parse(out).get(pattern):
            silent.append(f"{name} ({pattern})")
        scanned[pattern] = out
    if silent:
        raise UserError(f"no SSH host key from {', '.join(silent)}: is sshd reachable there? nothing recorded")
    existing = path.read_text() if path.exists() else ""
    result = merge(existing, scanned)
    if result.changed:
        raise UserError(
            f"host key changed for {', '.join(result.changed)} (recorded in {path}): refusing to replace it. If the "
            "machine was reinstalled, check its new fingerprint on its console and delete its line(s) first"
        )
    if result.new_lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in result.new_lines))
        path.chmod(0o600)
    return result
