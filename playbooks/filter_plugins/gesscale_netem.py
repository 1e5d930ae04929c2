"""Jinja filters that let the playbooks use gesscale's own netem code (one source of the tc plan).

`netem.yml` renders each node's script with `gesscale_tc_plan`, exactly what `gesscale netem apply` runs
over fabric; `measure.yml` judges the pings with `gesscale_rtt_report`, exactly what `gesscale netem measure`
prints. The filters run on the controller, inside the Python environment where gesscale is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

try:  # gesscale must be importable by the Python that runs ansible-playbook
    from gesscale.errors import UserError
    from gesscale.latency_map import LatencyMap, load_latency_map
    from netem.hosts import host_from_vars, hosts_for_map
    from netem.measure import format_verdict, judge, parse_ping
    from netem.plan import build_plan
except ImportError as _err:  # pragma: no cover - reported when a filter is used
    _IMPORT_ERROR: ImportError | None = _err
else:
    _IMPORT_ERROR = None

HOST_VARS = ("ansible_host", "ansible_user", "ansible_port", "netem_address", "netem_device")


def _need_gesscale() -> None:
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError(
            f"the gesscale netem filters need the gesscale package in ansible's Python: {_IMPORT_ERROR}"
        )


def _hosts(lmap: LatencyMap, hostvars: Mapping[str, Any]) -> dict:
    found = {}
    for name in lmap.names:
        if name in hostvars:
            hv = hostvars[name]
            found[name] = host_from_vars(name, {k: hv[k] for k in HOST_VARS if k in hv})
    return hosts_for_map(found, lmap, "inventory")


def gesscale_tc_plan(map_path: str, node: str, hostvars: Mapping[str, Any], device: str, mode: str) -> dict:
    """The node's plan as {script, clear_script, marker, device, mode, peers}; errors name the bad input."""
    _need_gesscale()
    try:
        lmap = load_latency_map(map_path)
        hosts = _hosts(lmap, hostvars)
        plan = build_plan(lmap, {n: h.address for n, h in hosts.items()}, {node: device}, mode, nodes=[node])[node]
    except UserError as err:
        raise AnsibleFilterError(str(err)) from None
    return {
        "script": plan.apply_script(),
        "clear_script": plan.clear_script(),
        "marker": plan.marker_path(),
        "device": plan.device,
        "mode": plan.mode,
        "peers": [{"name": r.peer, "address": r.address, "delay_ms": r.delay_ms, "classid": r.classid}
                  for r in plan.rules],  # fmt: skip
    }


def gesscale_map_peers(map_path: str, node: str, hostvars: Mapping[str, Any]) -> list[dict]:
    """The node's peers in the map, as [{name, address}], after the same checks as the plan."""
    _need_gesscale()
    try:
        lmap = load_latency_map(map_path)
        hosts = _hosts(lmap, hostvars)
    except UserError as err:
        raise AnsibleFilterError(str(err)) from None
    if node not in lmap.nodes:
        raise AnsibleFilterError(f"{map_path}: host {node} is not in the latency map")
    return [{"name": n, "address": hosts[n].address} for n in lmap.names if n != node]


def gesscale_rtt_report(
    map_path: str, hostvars: Mapping[str, Any], hosts: list[str], tolerance_ms: float, tolerance_pct: float
) -> dict:
    """Judge `netem_ping` results registered on each host: {text, ok, matrix}."""
    _need_gesscale()
    try:
        lmap = load_latency_map(map_path)
    except UserError as err:
        raise AnsibleFilterError(str(err)) from None
    stats = {}
    for src in hosts:
        for res in hostvars[src].get("netem_ping", {}).get("results", []):
            stats[(src, res["item"]["name"])] = parse_ping(res.get("stdout", ""))
    verdict = judge(lmap, stats, float(tolerance_ms), float(tolerance_pct))
    return {"text": format_verdict(verdict), "ok": verdict.ok, "matrix": verdict.matrix(lmap.names)}


class FilterModule:
    """Registers the gesscale netem filters with Ansible."""

    def filters(self) -> dict:
        """Filter name -> function."""
        return {
            "gesscale_tc_plan": gesscale_tc_plan,
            "gesscale_map_peers": gesscale_map_peers,
            "gesscale_rtt_report": gesscale_rtt_report,
        }
