"""Hosts as netem sees them: SSH coordinates and the address/device the `tc` plan uses.

The inventory is read with Ansible's own inventory machinery (YAML or INI, group_vars, host_vars), so the fabric
path and the playbooks agree on every variable; templated values are limited to the forms the shipped
inventories use and substituted as text, never evaluated (`netem.inventory_templates`). Variables used:

- `ansible_host`, `ansible_user`, `ansible_port`, `ansible_ssh_private_key_file`, `ansible_become`: SSH;
- `netem_address`: IPv4 address of the node on the cluster network (default: `ansible_host`);
- `netem_device`: interface that carries cluster traffic (default: found on the node with `ip route get`);
- `ansible_connection: local`: the host is this machine (commands run here, no SSH; several such hosts may share
  it, each with its own address, e.g. 127.0.0.51 and 127.0.0.52);
- `netem_python`: the Python on the host that has gesscale's `netem` package, for the userspace engine's delay
  daemon (default: `python3`; for local hosts the Python running gesscale);
- `ssh_known_hosts_file`: the host keys SSH checks (default: `known_hosts` in the inventory's folder; learned
  once by `gesscale provision --learn-host-keys`, `netem.known_hosts`): an unknown or changed key is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gesscale.errors import UserError, brief, cut
from gesscale.latency_map import LatencyMap
from gesscale.names import check_name
from netem.inventory_fields import CHECKS, check_host_vars, duplicate_addresses
from netem.inventory_templates import check_host_templates, render

CONNECTION_VARS = (
    "ansible_host",
    "ansible_user",
    "ansible_port",
    "ansible_ssh_private_key_file",
    "ansible_become",
    "netem_address",
    "netem_device",
    "ansible_connection",
    "netem_python",
    "ssh_known_hosts_file",
)


@dataclass(frozen=True)
class Host:
    """One inventory host: how to reach it over SSH and which address/device its `tc` plan uses."""

    name: str
    ssh_host: str | None
    address: str | None
    user: str | None = None
    port: int = 22
    key_file: str | None = None
    become: bool = False
    device: str | None = None
    connection: str | None = None
    python: str | None = None
    known_hosts: str | None = None  # the known_hosts file SSH checks this host's key against

    @property
    def local(self) -> bool:
        """Whether the host is this machine (`ansible_connection: local`): commands run here, not over SSH."""
        return self.connection == "local"

    @property
    def needs_sudo(self) -> bool:
        """Whether root commands must go through sudo (become asked and the login user is not root)."""
        return self.become and self.user not in (None, "root")


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def host_from_vars(name: str, hostvars: Mapping[str, Any]) -> Host:
    """Build a `Host` from one host's (already templated) inventory variables.

    Every variable that reaches a command or a rendered file is checked against its strict pattern first
    (`netem.inventory_fields`): an interface name with a quote or a newline is refused, not quoted.
    """
    check_host_vars(name, hostvars)
    ssh_host = hostvars.get("ansible_host")
    address = hostvars.get("netem_address", ssh_host)
    port = hostvars.get("ansible_port") or 22
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise UserError(f"host {cut(str(name))}: ansible_port must be a number, got {brief(port)}") from None
    return Host(
        name=name,
        ssh_host=None if ssh_host is None else str(ssh_host),
        address=None if address is None else str(address),
        user=hostvars.get("ansible_user"),
        port=port,
        key_file=hostvars.get("ansible_ssh_private_key_file"),
        become=_truthy(hostvars.get("ansible_become", False)),
        device=hostvars.get("netem_device"),
        connection=hostvars.get("ansible_connection"),
        python=hostvars.get("netem_python"),
        known_hosts=None if hostvars.get("ssh_known_hosts_file") is None else str(hostvars["ssh_known_hosts_file"]),
    )


def hosts_for_map(hosts: Mapping[str, Host], lmap: LatencyMap, source: str = "inventory") -> dict[str, Host]:
    """The inventory hosts the map names, in map order; every problem is raised before any host is touched.

    Errors: a map node absent from the inventory, an inventory host absent from the map (it would get no delay
    while its peers believe it is delayed: the emulated network would not be the map), a host without an
    address, an address that is not an IPv4 literal (u32 `match ip dst` needs one).
    """
    absent = [n for n in lmap.names if n not in hosts]
    if absent:
        raise UserError(f"{lmap.source}: node(s) {', '.join(absent)} not in {source}")
    chosen = {n: hosts[n] for n in lmap.names}
    _refuse_shared_addresses({n: h.address for n, h in hosts.items()}, source)
    for host in chosen.values():
        if not host.address:
            raise UserError(f"{source}: host {host.name} has no address (set ansible_host or netem_address)")
        try:
            ipaddress.IPv4Address(host.address)
        except ValueError:
            raise UserError(
                f"{source}: host {host.name}: address {host.address!r} is not an IPv4 address "
                "(set netem_address to the node's IP on the cluster network)"
            ) from None
        if not host.ssh_host and not host.local:
            raise UserError(f"{source}: host {host.name} has no ansible_host to connect to")
    unmapped = [n for n in hosts if n not in lmap.nodes]
    if unmapped:
        raise UserError(
            f"{source}: host(s) {', '.join(unmapped)} not in the latency map {lmap.source} (every host of the "
            "inventory needs its RTTs: add the node to the map, or use an inventory of the map's hosts only)"
        )
    return chosen


def _refuse_shared_addresses(addresses: Mapping[str, str | None], source: str) -> None:
    """Two hosts on one IP would get each other's delays (the filters match by destination address)."""
    shared = duplicate_addresses(addresses)
    if shared:
        address, first, second = shared[0]
        raise UserError(f"{source}: hosts {first} and {second} have the same address {address} (each host needs its "
                        "own; set netem_address to the node's IP on the cluster network)")


def read_inventory(p: Path) -> tuple[Any, Any, Any]:
    """Ansible's (loader, inventory, variable manager) for a YAML or INI inventory, every name checked.

    Only the `yaml` and `ini` inventory plugins are enabled: the `script` plugin would run an executable file
    of an inventory folder, and `auto` would run any plug-in a YAML file names. Host and group names are
    checked against the name rule (`gesscale.names`), and every value against the allowed Jinja forms
    (`netem.inventory_templates`): nothing of the inventory is evaluated.
    """
    # Imported here: ansible is heavy and only this adapter needs it.
    from ansible import constants
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    enabled = constants.INVENTORY_ENABLED
    constants.INVENTORY_ENABLED = ["yaml", "ini"]
    try:
        inventory = InventoryManager(loader=loader, sources=[str(p)])
    except Exception as err:  # ansible reports parse errors with its own exception types
        raise UserError(f"{p}: cannot parse inventory: {err}") from None
    finally:
        constants.INVENTORY_ENABLED = enabled
    for group in inventory.groups:
        check_name("group", group, f"{p}: group name")
    for host in inventory.hosts:
        check_name("host", host, f"{p}: host name")
    variables = VariableManager(loader=loader, inventory=inventory)
    for host in inventory.hosts.values():
        check_host_templates(host.name, variables.get_vars(host=host))
    return loader, inventory, variables


def load_inventory(path: str | Path) -> dict[str, Host]:
    """Read an Ansible inventory (file or directory) into hosts; the allowed Jinja forms are substituted as text
    (`netem.inventory_templates`), any other template is refused: nothing is evaluated."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"inventory not found: {p}")
    _, inventory, variables = read_inventory(p)
    hosts: dict[str, Host] = {}
    default_known_hosts = str((p if p.is_dir() else p.parent).resolve() / "known_hosts")
    for h in inventory.get_hosts():
        all_vars = variables.get_vars(host=h)
        wanted = {key: render(all_vars[key], all_vars)
                  for key in (*CONNECTION_VARS, *(k for k in CHECKS if k not in CONNECTION_VARS))
                  if key in all_vars}  # fmt: skip
        wanted.setdefault("ssh_known_hosts_file", default_known_hosts)
        hosts[h.name] = host_from_vars(h.name, wanted)
    if not hosts:
        raise UserError(f"{p}: no hosts in inventory (is it an Ansible inventory?)")
    _refuse_shared_addresses({n: h.address for n, h in hosts.items()}, str(p))
    return hosts
