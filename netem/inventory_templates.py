"""Jinja in inventory values: the few forms the shipped inventories use, read without evaluating anything.

Ansible evaluates a `{{ ... }}` in an inventory value wherever the value is used, on the machine that runs
Ansible: `{{ lookup('pipe', ...) }}` runs a command there. `gesscale netem plan`, `provision --plan` and the
other commands that say they touch no host must evaluate nothing, and a playbook should evaluate only what the
project ships. So an inventory value may carry exactly these forms (inventory/pi10, inventory/local):

- `{{ inventory_dir }}`: the folder of the inventory source;
- `{{ ssh_known_hosts_file }}`: the value of that variable (itself checked the same way);
- `{{ lookup('ansible.builtin.env', 'NAME') }}`: an environment variable (the k3s token, the MQTT password).

Any other Jinja (an expression, a statement `{% %}`, a comment `{# #}`, another lookup or variable) is refused
with one line naming the host and the variable, before anything is rendered or run; a value marked `!unsafe`
is text to Ansible and passes as it is. `render` substitutes the allowed forms by plain string replacement,
never through a template engine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from gesscale.errors import UserError
from gesscale.names import shown

_INVENTORY_DIR = re.compile(r"\{\{\s*inventory_dir\s*\}\}")
_KNOWN_HOSTS = re.compile(r"\{\{\s*ssh_known_hosts_file\s*\}\}")
_ENV = re.compile(r"\{\{\s*lookup\(\s*'ansible\.builtin\.env'\s*,\s*'([A-Za-z_][A-Za-z0-9_]{0,127})'\s*\)\s*\}\}")
_ALLOWED = (_INVENTORY_DIR, _KNOWN_HOSTS, _ENV)
_JINJA = re.compile(r"\{\{|\{%|\{#|\}\}|%\}|#\}")
ALLOWED_FORMS = "{{ inventory_dir }}, {{ ssh_known_hosts_file }}, {{ lookup('ansible.builtin.env', 'NAME') }}"
# Variables Ansible adds to every host (not written by the user); `hostvars` would template on access.
_MAGIC = frozenset({"hostvars", "groups", "group_names", "inventory_hostname", "inventory_hostname_short",
                    "inventory_dir", "inventory_file", "playbook_dir", "ansible_playbook_python", "omit",
                    "ansible_config_file", "ansible_version", "ansible_check_mode", "ansible_diff_mode",
                    "ansible_forks", "ansible_inventory_sources", "ansible_run_tags", "ansible_skip_tags",
                    "ansible_verbosity", "role_names", "environment", "vars"})  # fmt: skip


def is_templated(value: str) -> bool:
    """Whether a string carries any Jinja delimiter."""
    return _JINJA.search(value) is not None


def _marked_unsafe(value: str) -> bool:
    """Whether Ansible would leave the string as it is (`!unsafe`): such a value is text, whatever it holds."""
    try:
        from ansible.template import is_trusted_as_template  # ansible-core >= 2.19: only trusted strings render
    except ImportError:  # older ansible-core renders every string but its unsafe type
        try:
            from ansible.utils.unsafe_proxy import AnsibleUnsafe
        except ImportError:
            return False
        return isinstance(value, AnsibleUnsafe)
    return type(value) is not str and not is_trusted_as_template(value)  # a plain str (e.g. --extra) is checked


def _refused(text: str) -> bool:
    for form in _ALLOWED:
        text = form.sub("", text)
    return is_templated(text)


def check_templates(host: str, key: str, value: Any) -> None:
    """Refuse a value (or a key or item inside it) with Jinja other than the allowed forms: one `UserError`."""
    if isinstance(value, str):
        if _refused(value) and not _marked_unsafe(value):
            raise UserError(f"host {host}: {key}: template {shown(value)} is not allowed in an inventory (only "
                            f"{ALLOWED_FORMS}; write the value itself)")
    elif isinstance(value, dict):  # a plain mapping only: Ansible's lazy wrappers template on access
        for k, v in value.items():
            check_templates(host, key, str(k))
            check_templates(host, f"{key}.{k}", v)
    elif isinstance(value, list | tuple):
        for item in value:
            check_templates(host, key, item)


def check_host_templates(host: str, hostvars: Mapping[str, Any]) -> None:
    """`check_templates` on every variable the user wrote for one host (Ansible's own additions skipped)."""
    for key, value in hostvars.items():
        if key not in _MAGIC:
            check_templates(host, str(key), value)


def render(value: Any, hostvars: Mapping[str, Any]) -> Any:
    """A checked value with the allowed forms replaced by their values, as plain text (nothing evaluated)."""
    if not isinstance(value, str) or not is_templated(value) or _marked_unsafe(value):
        return value
    text = _INVENTORY_DIR.sub(lambda _: str(hostvars.get("inventory_dir") or ""), value)
    if _KNOWN_HOSTS.search(text):
        known = render(hostvars.get("ssh_known_hosts_file", ""), {**hostvars, "ssh_known_hosts_file": ""})
        text = _KNOWN_HOSTS.sub(lambda _: str(known), text)
    return _ENV.sub(lambda m: os.environ.get(m.group(1), ""), text)
