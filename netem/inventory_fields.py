"""Strict patterns for the inventory values that reach a command line, a script or a rendered config file.

`gesscale netem` puts a host's interface, address and Python into shell commands run as root over SSH (the
tc script's marker path is built from the interface name), and the playbooks put addresses, the interface and
the node labels into k3s', Kafka's and mosquitto's configuration files. Quoting protects a shell, not a file
path (`../`) nor a line-oriented config file (a newline), so every such value is checked here against a
pattern that admits only what the field can legitimately be, before any host is contacted. One function per
field kind; `check_host_vars` applies them to one host's variables and `duplicate_addresses` finds two hosts
claiming one IP.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from typing import Any

from gesscale.errors import UserError, brief, cut
from gesscale.names import PATTERNS

# Linux interface names: at most 15 bytes (IFNAMSIZ - 1), no '/', ':' or whitespace (dev_valid_name); we also
# refuse anything but letters, digits, '_', '.', '-' (eth0, wlan0, enp1s0, eth0.100, br-lan), and '.'/'..'.
_DEVICE = re.compile(PATTERNS["device"])
# DNS host names (RFC 1123 labels) for ansible_host when it is not an IP literal.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?")
# Login names: POSIX portable user names (letters, digits, '.', '_', '-', not starting with '-'), 32 at most.
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
# Paths (SSH key, remote Python): no whitespace, quotes, '$', '`', ';', '&', '|', '<', '>', '*', '?', '\\'.
_PATH = re.compile(r"[A-Za-z0-9_./~+@%,:=-]{1,4096}")
# Ansible connection plugin names (local, ssh, paramiko_ssh, community.docker.docker).
_CONNECTION = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*")
# Kubernetes label values (node labels k3s sets from region and arch): 63 characters at most.
_LABEL_VALUE = re.compile(rf"(?:{PATTERNS['region']})?")  # the name rule's region, or empty


def _refuse(host: str, key: str, value: Any, expected: str) -> UserError:
    return UserError(f"host {cut(host)}: {key} {brief(value)} is not {expected}")


def check_device(host: str, value: Any, key: str = "netem_device") -> str:
    """A Linux interface name (eth0, wlan0, eth0.100); anything else is refused."""
    if not isinstance(value, str) or not _DEVICE.fullmatch(value) or value in (".", ".."):
        raise _refuse(host, key, value, "an interface name (letters, digits, '_', '.', '-'; at most 15)")
    return value


def check_ipv4(host: str, value: Any, key: str = "netem_address") -> str:
    """An IPv4 literal (the u32 filters and the delay daemon's rules match on it)."""
    try:
        return str(ipaddress.IPv4Address(str(value).strip() if isinstance(value, str) else value))
    except (ValueError, TypeError):
        raise _refuse(host, key, value, "an IPv4 address") from None


def check_ssh_host(host: str, value: Any, key: str = "ansible_host") -> str:
    """An IP literal or a DNS host name; an IPv6 scope id (`fe80::1%eth0`) must be an interface name or index.

    Python's `ipaddress` takes anything after the `%` as the scope id (a newline too), and the value is rendered
    into line-oriented config files (k3s' config.yaml), so the scope id is checked against the device pattern.
    """
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text is not None:
        try:
            address = ipaddress.ip_address(text)
            scope = getattr(address, "scope_id", None)
            if scope is not None and not _DEVICE.fullmatch(scope):
                raise _refuse(host, key, value, "an IP address whose scope id is an interface name (fe80::1%eth0)")
            return text
        except ValueError:
            if _HOSTNAME.fullmatch(text):
                return text
    raise _refuse(host, key, value, "an IP address or a DNS host name")


def check_user(host: str, value: Any, key: str = "ansible_user") -> str:
    """A login name (POSIX portable characters)."""
    if not isinstance(value, str) or not _USER.fullmatch(value):
        raise _refuse(host, key, value, "a user name (letters, digits, '_', '.', '-')")
    return value


def check_path(host: str, value: Any, key: str) -> str:
    """A file path or command name without whitespace or shell metacharacters."""
    if not isinstance(value, str) or not _PATH.fullmatch(value):
        raise _refuse(host, key, value, "a path without spaces, quotes or shell characters")
    return value


def check_port(host: str, value: Any, key: str = "ansible_port") -> int:
    """A TCP port, 1-65535 (a whole number, or a string of one)."""
    try:
        port = int(str(value).strip()) if not isinstance(value, bool) else -1
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise _refuse(host, key, value, "a port number (1-65535)")
    return port


def check_connection(host: str, value: Any, key: str = "ansible_connection") -> str:
    """An Ansible connection plugin name (local, ssh, paramiko_ssh, community.docker.docker)."""
    if not isinstance(value, str) or not _CONNECTION.fullmatch(value):
        raise _refuse(host, key, value, "a connection plugin name")
    return value


def check_label_value(host: str, value: Any, key: str) -> str:
    """A Kubernetes label value (k3s labels the node with it)."""
    text = str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
    if text is None or not _LABEL_VALUE.fullmatch(text):
        raise _refuse(host, key, value, "a label value (letters, digits, '_', '.', '-'; at most 63)")
    return text


def check_number(host: str, value: Any, key: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """A finite number in [lo, hi] (or (lo, hi])."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number > hi or number < lo or (lo_open and number == lo):
        raise _refuse(host, key, value, f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]")
    return number


# Each checked variable and its check. Values absent from a host are not checked (the roles have defaults).
CHECKS: dict[str, Any] = {
    "ansible_host": check_ssh_host,
    "ansible_user": check_user,
    "ansible_port": check_port,
    "ansible_ssh_private_key_file": lambda h, v: check_path(h, v, "ansible_ssh_private_key_file"),
    "ansible_connection": lambda h, v: check_connection(h, v),
    "netem_address": check_ipv4,
    "netem_device": check_device,
    "netem_python": lambda h, v: check_path(h, v, "netem_python"),
    "region": lambda h, v: check_label_value(h, v, "region"),
    "arch": lambda h, v: check_label_value(h, v, "arch"),
    "latitude": lambda h, v: check_number(h, v, "latitude", -90, 90),
    "longitude": lambda h, v: check_number(h, v, "longitude", -180, 180),
    "cpu_budget": lambda h, v: check_number(h, v, "cpu_budget", 0, 1024, lo_open=True),
}


def check_host_vars(host: str, hostvars: Mapping[str, Any]) -> None:
    """Check every variable of `CHECKS` the host sets (after templating); the first bad one is a `UserError`."""
    for key, check in CHECKS.items():
        value = hostvars.get(key)
        if value is not None:
            check(host, value)


def duplicate_addresses(addresses: Mapping[str, str | None]) -> list[tuple[str, str, str]]:
    """(address, first host, second host) for every host whose address another host already has."""
    seen: dict[str, str] = {}
    out = []
    for host, address in addresses.items():
        if not address:
            continue
        if address in seen:
            out.append((address, seen[address], host))
        else:
            seen[address] = host
    return out
