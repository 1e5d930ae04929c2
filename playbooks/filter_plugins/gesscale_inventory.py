"""Jinja filter that checks the inventory before site.yml touches a host (the same checks as gesscale's CLI).

`gesscale provision` reads the inventory with `netem.hosts.load_inventory` first; a user who runs
`ansible-playbook playbooks/site.yml` directly gets the same refusals from the first play, which calls
`gesscale_inventory_problems`: host names against the name rule, every value against the allowed Jinja forms
(read untemplated: a refused template is never evaluated), every value that reaches a command or a rendered
file (addresses, interface, user, paths, label sources) against its strict pattern, and two hosts on one
address.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

try:  # gesscale must be importable by the Python that runs ansible-playbook
    from gesscale.errors import UserError
    from gesscale.names import check_name
    from netem.inventory_fields import CHECKS, check_host_vars, duplicate_addresses
    from netem.inventory_templates import check_host_templates
except ImportError as _err:  # pragma: no cover - reported when the filter is used
    _IMPORT_ERROR: ImportError | None = _err
else:
    _IMPORT_ERROR = None


def gesscale_inventory_problems(hostvars: Mapping[str, Any], hosts: list[str]) -> list[str]:
    """One line per problem (at most one per host, then shared addresses); empty when the inventory is sound."""
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError(f"the gesscale filters need the gesscale package in ansible's Python: {_IMPORT_ERROR}")
    problems = []
    addresses = {}
    for name in hosts:
        raw = hostvars.raw_get(name) if hasattr(hostvars, "raw_get") else hostvars[name]  # untemplated values
        try:
            check_name("host", name, "inventory: host name")
            check_host_templates(name, raw)
        except UserError as err:  # checked before any value is read through Ansible's templating
            problems.append(str(err))
            continue
        hv = hostvars[name]
        values = {k: hv[k] for k in CHECKS if k in hv}
        try:
            check_host_vars(name, values)
        except UserError as err:
            problems.append(str(err))
        addresses[name] = values.get("netem_address", values.get("ansible_host"))
    for address, first, second in duplicate_addresses({n: str(a) if a else None for n, a in addresses.items()}):
        problems.append(f"hosts {first} and {second} have the same address {address}")
    return problems


class FilterModule:
    """Registers the gesscale inventory filter with Ansible."""

    def filters(self) -> dict:
        """Filter name -> function."""
        return {"gesscale_inventory_problems": gesscale_inventory_problems}
