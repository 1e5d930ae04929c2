"""`gesscale provision --plan`: what a playbook would do on each host, read from the inventory and the roles'
variables only, without connecting to any host.

The playbook file says which roles run on which host pattern (and their tags); Ansible's own inventory
machinery resolves the patterns and each host's variables (group_vars, host_vars, `--extra`); each role's
`defaults/` and `vars/` fill in the rest, with Ansible's precedence (role defaults < inventory < role vars <
extra vars). One summary per role turns those values into lines ("k3s v1.31.4+k3s1 agent, joins
https://192.168.50.101:6443"). What only the host can tell (its architecture, whether it is a Raspberry Pi,
what is already installed) is said to be decided on the host; secrets are never templated nor shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from netem.hosts import read_inventory
from netem.inventory_templates import check_templates
from netem.playbooks import PLAYBOOK_DIR, playbook_path

UNKNOWN = "<decided on the host>"


@dataclass
class RolePlan:
    """One role on one host: its tags and what it would do, one line each."""

    role: str
    tags: tuple[str, ...]
    lines: list[str]


@dataclass
class HostPlan:
    """Everything a playbook would do on one host, in play order."""

    host: str
    roles: list[RolePlan] = field(default_factory=list)


class _Values:
    """A host's variables as Ansible would see them in one role, templated on demand (no facts, no lookups of
    secrets); a value that needs the host is `UNKNOWN`."""

    def __init__(self, templar: Any, variables: Mapping[str, Any]) -> None:
        self._templar = templar
        self._vars = variables

    def raw(self, name: str) -> Any:
        """The value as written, untemplated (to template only parts of it, e.g. user names not passwords)."""
        return self._vars.get(name)

    def template(self, value: Any) -> Any:
        """Template one value in this host's context (`UNKNOWN` when only the host could tell)."""
        try:
            return self._templar.template(value)
        except Exception:  # undefined facts (ansible_facts[...]) and the like: only the host knows
            return UNKNOWN

    def __call__(self, name: str, default: Any = None) -> Any:
        if name not in self._vars:
            return default
        return self.template(self._vars[name])


def _trusted(value: Any) -> Any:
    """Mark the project's own role values as templates (ansible-core >= 2.19 templates only trusted strings;
    Ansible itself trusts role files, which is what these are)."""
    try:
        from ansible.template import trust_as_template
    except ImportError:  # older ansible-core templates every string
        return value
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    return value


def _role_vars(loader: Any, role: str, folder: str) -> dict[str, Any]:
    """A role's defaults/ or vars/ (files of this project), as templates."""
    path = PLAYBOOK_DIR / "roles" / role / folder / "main.yml"
    return _trusted(dict(loader.load_from_file(str(path)) or {})) if path.exists() else {}


def _join(values: Any) -> str:
    if isinstance(values, list | tuple):
        return ", ".join(str(v) for v in values) or "none"
    return str(values)


def _prereq(v: _Values) -> list[str]:
    mode = v("prereq_iptables_mode") or "kept as is"
    lines = [f"apt packages: {_join(v('prereq_packages'))} (cache refresh: {v('prereq_apt_update')})",
             "sysctl net.ipv4.ip_forward=1 in /etc/sysctl.d/90-gesscale.conf",
             f"iptables backend: {mode}",
             f"NTP servers for systemd-timesyncd: {_join(v('prereq_ntp_servers'))}"]  # fmt: skip
    if str(v("prereq_manage_kernel")).lower() in ("true", "1", "yes"):
        lines.append("load br_netfilter and overlay now and at boot; bridge-nf-call-iptables=1")
    return lines


def _raspberrypi(v: _Values) -> list[str]:
    return [f"if the board is a Raspberry Pi ({UNKNOWN}; forced: {v('raspberrypi_force')}): add "
            f"{_join(v('raspberrypi_cmdline_flags'))} to the first of {_join(v('raspberrypi_cmdline_candidates'))}",
            f"reboot when the command line changed: {v('raspberrypi_reboot')}"]  # fmt: skip


_ENV_LOOKUP = re.compile(r"""lookup\(\s*['"](?:ansible\.builtin\.)?env['"]\s*,\s*['"](\w+)['"]""")


def _token(v: _Values) -> str:
    """Whether the cluster token is set, never its value: set (not shown), in a vault (not shown), or missing
    or too short, with how to set it (the k3s role would stop on it)."""
    raw = v.raw("k3s_token")
    env = _ENV_LOOKUP.search(str(raw or ""))
    if env and str(raw).strip().startswith("{{") and str(raw).strip().endswith("}}"):
        value = os.environ.get(env.group(1), "")  # an env lookup runs on the controller: this process's env
    else:
        value = v.template(raw) if raw not in (None, "") else ""
    if value == UNKNOWN or not isinstance(value, str):  # vault-encrypted without its password, another lookup
        return "token from the inventory (encrypted or looked up; not shown)"
    how = (f"export {env.group(1)} (the inventory reads it), " if env else "") + \
        "or set k3s_token in an ansible-vault file or a --secrets-file (docs/pi-cluster.md, step 3)"
    if not value:
        return f"token MISSING: k3s_token is empty; {how}"
    if len(str(value)) < 16:
        return f"token TOO SHORT: k3s_token has fewer than 16 characters (the k3s role refuses it); {how}"
    return "token set in the inventory (not shown)"


def _k3s(v: _Values, mode: str) -> list[str]:
    source = (f"from the air-gap folder {v('k3s_airgap_dir')} on the controller" if v("k3s_airgap_dir")
              else "downloaded from the k3s release (checksum verified)")  # fmt: skip
    labels = v("k3s_node_labels")
    prefix = v("k3s_label_prefix")
    label_text = (", ".join(f"{prefix}/{k}={val}" for k, val in sorted(labels.items()))
                  if isinstance(labels, Mapping) else str(labels))  # fmt: skip
    address = v("netem_address") or v("ansible_host")
    lines = [f"k3s {v('k3s_version')} {mode}, binary {source} (architecture {UNKNOWN})",
             f"/etc/rancher/k3s/config.yaml: node-ip {address}, {_token(v)}"
             + (f", flannel-iface {v('netem_device')}" if v("netem_device") else ""),
             f"node labels: {label_text or 'none'}"]  # fmt: skip
    if mode == "server":
        lines.append(f"unit k3s.service started; wait until the node is Ready ({v('k3s_server_ready_timeout')} s)")
    else:
        lines.append(f"unit k3s-agent.service started; joins https://{v('k3s_server_address')}:{v('k3s_api_port')}")
    return lines


def _kafka(v: _Values) -> list[str]:
    archive = v("kafka_local_archive") or v("kafka_archive_url")
    return [f"Kafka {v('kafka_version')} (Scala {v('kafka_scala_version')}) from {archive} into {v('kafka_home')}, "
            f"Java {v('kafka_java_package')}",
            f"KRaft broker+controller, listener {v('kafka_address')}:{v('kafka_port')} "
            f"({v('kafka_security_protocol')}), data in {v('kafka_data_dir')}, "
            f"user {v('kafka_user')}",
            f"topics {_join(v('kafka_topics'))}: {v('kafka_partitions')} partitions, replication "
            f"{v('kafka_replication_factor')} (created once, from the first kafka host)"]  # fmt: skip


def _mqtt(v: _Values) -> list[str]:
    users = v.raw("mqtt_users")  # each name templated alone: the passwords are never evaluated
    if isinstance(users, list):
        names = [v.template(u.get("name", "?")) for u in users if isinstance(u, Mapping)]
    else:
        names = [UNKNOWN]
    tls = str(v("mqtt_tls")).lower() in ("true", "yes", "1")
    port = f"{v('mqtt_tls_port')} (TLS)" if tls else str(v("mqtt_port"))
    return [f"mosquitto on {v('mqtt_bind_address')}:{port}, anonymous clients refused",
            f"users (passwords not shown): {_join(names)}; ACL per user's topics"]  # fmt: skip


def _spark_rbac(v: _Values) -> list[str]:
    return [f"render and kubectl apply {v('spark_rbac_manifest_dir')}/spark-rbac.yaml: namespace "
            f"{v('spark_rbac_namespace')}, service accounts {v('spark_rbac_driver_service_account')} (driver) and "
            f"{v('spark_rbac_controller_service_account')} (controller, in namespace "
            f"{v('spark_rbac_controller_namespace')}), their Roles"]  # fmt: skip


def _netem(v: _Values) -> list[str]:
    device = v("netem_device") or f"found with `ip route get` ({UNKNOWN})"
    return [f"tc plan of {v('netem_latency_map') or '<netem_latency_map not set>'} on {device}, mode "
            f"{v('netem_mode')}, state {v('netem_state')} (`gesscale netem plan` prints the script)"]


SUMMARIES: dict[str, Callable[[_Values], list[str]]] = {
    "prereq": _prereq,
    "raspberrypi": _raspberrypi,
    "k3s_server": lambda v: _k3s(v, "server"),
    "k3s_agent": lambda v: _k3s(v, "agent"),
    "kafka": _kafka,
    "mqtt": _mqtt,
    "spark_rbac": _spark_rbac,
    "netem": _netem,
}
# Roles whose defaults and vars the summary needs besides the role's own (k3s_server/agent import the k3s role).
IMPORTS = {"k3s_server": ("k3s",), "k3s_agent": ("k3s",)}


def _selected(tags: tuple[str, ...], only: set[str], skip: set[str]) -> bool:
    if only and not (set(tags) & only or "always" in tags):
        return False
    return not set(tags) & skip


def provision_plan(
    playbook: str,
    inventory: str | Path,
    *,
    tags: str | None = None,
    skip_tags: str | None = None,
    limit: str | None = None,
    extra_vars: Mapping[str, Any] | None = None,
) -> list[HostPlan]:
    """Per host, the roles `playbook` would run and what each would do; nothing is contacted.

    Plays on `localhost` (the inventory check of site.yml) and tasks outside roles are not listed.
    """
    from ansible.template import Templar

    path = playbook_path(playbook)
    inv = Path(inventory)
    if not inv.exists():
        raise UserError(f"inventory not found: {inv}")
    for key, value in (extra_vars or {}).items():
        check_templates("--extra", key, value)  # templated below with the roles' values: only the allowed forms
    loader, inventory_mgr, variables = read_inventory(inv)  # names and templates checked, nothing evaluated
    plays = loader.load_from_file(str(path)) or []
    if limit:
        inventory_mgr.subset(limit)
    only = {t.strip() for t in (tags or "").split(",") if t.strip()}
    skip = {t.strip() for t in (skip_tags or "").split(",") if t.strip()}
    # every host's variables, as the roles' `hostvars[...]` sees them (the server address, Kafka's voters)
    all_vars = {name: variables.get_vars(host=host) for name, host in inventory_mgr.hosts.items()}
    plans: dict[str, HostPlan] = {}
    for play in plays:
        hosts_pattern = str(play.get("hosts", ""))
        if hosts_pattern == "localhost":
            continue
        targets = inventory_mgr.get_hosts(hosts_pattern)
        play_tags = tuple(play.get("tags") or ())
        for entry in play.get("roles") or []:
            role = str(entry["role"]) if isinstance(entry, Mapping) else str(entry)
            entry_tags = tuple(entry.get("tags") or ()) if isinstance(entry, Mapping) else ()
            role_tags = play_tags + entry_tags
            if not _selected(role_tags, only, skip):
                continue
            role_params = ({k: v for k, v in entry.items() if k not in ("role", "tags", "when")}
                           if isinstance(entry, Mapping) else {})  # fmt: skip
            defaults: dict[str, Any] = {}
            own_vars: dict[str, Any] = {}
            for r in (*IMPORTS.get(role, ()), role):
                defaults.update(_role_vars(loader, r, "defaults"))
                own_vars.update(_role_vars(loader, r, "vars"))
            summary = SUMMARIES.get(role, lambda v: ["(no summary for this role)"])
            for host in targets:
                merged = {**defaults, **all_vars[host.name], **own_vars, **(play.get("vars") or {}),
                          **role_params, **(extra_vars or {}), "hostvars": all_vars}  # fmt: skip
                values = _Values(Templar(loader=loader, variables=merged), merged)
                plans.setdefault(host.name, HostPlan(host.name)).roles.append(
                    RolePlan(role, role_tags, summary(values)))
    return list(plans.values())


def format_plan(plans: list[HostPlan]) -> str:
    """The plan as text: one block per host, one indented line per action."""
    out = []
    for plan in plans:
        out.append(f"{plan.host}:")
        for role in plan.roles:
            out.append(f"  [{role.role}] ({', '.join(role.tags) or 'no tag'})")
            out.extend(f"    - {line}" for line in role.lines)
    return "\n".join(out) + "\n"
