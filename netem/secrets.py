"""Secrets reach the playbooks by file, never by command line (pure checks, one small file check).

A value given with `gesscale provision -e KEY=VALUE` shows in `ps`, in the shell's history and in CI logs.
`refuse_secret_extras` turns away any `-e` whose name (or value) looks like a secret, pointing to
`--secrets-file` (a YAML file of variables, readable by its owner only, or an ansible-vault file) or to an
ansible-vault file in the inventory. `check_secrets_file` refuses a plain-text secrets file that others may
read; an ansible-vault file is encrypted and may have any mode.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Mapping
from pathlib import Path

from gesscale.errors import UserError

# Variable names that hold secrets in our roles (k3s_token, kafka_sasl_users, mqtt_users' passwords, TLS keys)
# and in general use; `*_key_file` / `*_file` paths are not secrets themselves.
SECRET_NAME = re.compile(r"(token|passw|secret|credential|private_key(?!_file)|_key$|^key$|sasl_users|mqtt_users)",
                         re.IGNORECASE)
SECRET_VALUE = re.compile(r"(password|passwd|token|secret)\s*['\"]?\s*[:=]", re.IGNORECASE)
VAULT_HEADER = "$ANSIBLE_VAULT;"


def looks_secret(name: str, value: str = "") -> bool:
    """Whether `-e name=value` looks like it carries a secret (by its name, or a password inside a value)."""
    return bool(SECRET_NAME.search(name)) or bool(SECRET_VALUE.search(value))


def refuse_secret_extras(extra: Mapping[str, str]) -> None:
    """A `UserError` naming the first secret-looking extra variable (its value is never repeated)."""
    for name, value in extra.items():
        if looks_secret(name, str(value)):
            raise UserError(
                f"-e {name}=...: looks like a secret, and a command line shows in ps and the shell history; "
                "put it in a file: --secrets-file FILE (YAML, mode 0600, or ansible-vault encrypted) or an "
                "ansible-vault file under the inventory's group_vars (docs/pi-cluster.md, Secrets)"
            )


def check_secrets_file(path: Path) -> None:
    """Refuse a missing secrets file, or a plain-text one that group or others may read."""
    try:
        mode = path.stat().st_mode
        head = path.read_text(errors="replace")[: len(VAULT_HEADER)]
    except FileNotFoundError:
        raise UserError(f"secrets file not found: {path}") from None
    except OSError as err:
        raise UserError(f"secrets file {path}: {err.strerror}") from None
    if head != VAULT_HEADER and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(f"secrets file {path} is readable by others (mode {stat.S_IMODE(mode):04o}): "
                        f"chmod 600 {path}, or encrypt it with ansible-vault")
