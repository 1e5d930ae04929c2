#!/usr/bin/python
"""Ansible module: keep one user's password in a mosquitto password file, idempotently.

`mosquitto_passwd` salts every hash with fresh randomness, so running it on each play would always report a
change. This module first checks the stored hash against the wanted password and only rewrites the line when
they differ, in the PBKDF2-SHA512 format mosquitto 2.x reads (`user:$7$<iterations>$<salt b64>$<hash b64>`);
older `$6$` (salted SHA-512) lines are verified too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: mosquitto_user
short_description: Keep a user's password in a mosquitto password file
description: Adds, updates or removes one user; a line that already matches the password is left as is.
options:
  path: {description: Password file., type: path, required: true}
  name: {description: User name., type: str, required: true}
  password: {description: Wanted password (state=present)., type: str, no_log: true}
  state: {description: present or absent., type: str, default: present, choices: [present, absent]}
  iterations: {description: PBKDF2 iterations for new hashes (mosquitto's default is 101)., type: int, default: 101}
extends_documentation_fragment: [files]
"""

SALT_BYTES = 12  # what mosquitto_passwd uses


def _hash_pbkdf2(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)


def matches(stored: str, password: str) -> bool:
    """Whether a stored mosquitto hash (`$7$...` or `$6$...`) is the hash of `password`."""
    parts = stored.split("$")
    try:
        if len(parts) == 5 and parts[1] == "7":
            salt, want = base64.b64decode(parts[3]), base64.b64decode(parts[4])
            return hmac.compare_digest(_hash_pbkdf2(password, salt, int(parts[2])), want)
        if len(parts) == 4 and parts[1] == "6":
            salt, want = base64.b64decode(parts[2]), base64.b64decode(parts[3])
            return hmac.compare_digest(hashlib.sha512(password.encode() + salt).digest(), want)
    except (ValueError, TypeError):
        return False
    return False


def encode(password: str, iterations: int) -> str:
    """A new `$7$` hash with a random salt."""
    salt = os.urandom(SALT_BYTES)
    digest = _hash_pbkdf2(password, salt, iterations)
    return f"$7${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def main() -> None:
    """Entry point of the module."""
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "name": {"type": "str", "required": True},
            "password": {"type": "str", "no_log": True},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
            "iterations": {"type": "int", "default": 101},
        },
        required_if=[("state", "present", ["password"])],
        add_file_common_args=True,
        supports_check_mode=True,
    )
    path, name, state = module.params["path"], module.params["name"], module.params["state"]
    if ":" in name:
        module.fail_json(msg=f"user name {name!r} must not contain ':'")
    lines = []
    if os.path.exists(path):
        with open(path) as fh:
            lines = fh.read().splitlines()
    current = [i for i, line in enumerate(lines) if line.split(":", 1)[0] == name]
    new_lines = [line for i, line in enumerate(lines) if i not in current]
    changed = False
    if state == "present":
        ok = len(current) == 1 and matches(lines[current[0]].split(":", 1)[1], module.params["password"])
        if ok:
            new_lines = lines
        else:
            new_lines.append(f"{name}:{encode(module.params['password'], module.params['iterations'])}")
            changed = True
    elif current:
        changed = True
    if changed and not module.check_mode:
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(f"{line}\n" for line in new_lines))
        os.replace(tmp, path)
    if os.path.exists(path):
        file_args = module.load_file_common_arguments(module.params)
        changed = module.set_fs_attributes_if_different(file_args, changed)
    module.exit_json(changed=changed, path=path, name=name)


if __name__ == "__main__":
    main()
