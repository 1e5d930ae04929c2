"""The userspace engine on a set of hosts: apply, clear, health, restart (EnOSlib-style: plan, deploy, check).

Each verb sends one agent command (`python -m netem.userspace.agent VERB SPEC`) per node through a
`netem.remote.Remote`, locally or over SSH; several nodes may be the same machine (local hosts). Bandwidth
limits are htb classes (pfifo leaves) on the node's interface, built by `netem.plan` like the kernel engine's
tree; local hosts share loopback, so they take no bandwidth limit.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gesscale.errors import UserError
from netem.hosts import Host
from netem.plan import NodePlan, PeerRule
from netem.remote import Remote, on_each
from netem.userspace.agent import encode
from netem.userspace.health import Health, judge_health
from netem.userspace.rules import UserspaceNodePlan


def shaping_plan(plan: UserspaceNodePlan, device: str) -> NodePlan | None:
    """The htb tree of a node's bandwidth limits (pfifo leaves), or None when no pair has one."""
    limited = [x for x in plan.links if x.bandwidth_mbit]
    if not limited:
        return None
    rules = tuple(PeerRule(x.peer, x.address, 0.0, f"1:{0x10 + i:x}", bandwidth_mbit=x.bandwidth_mbit)
                  for i, x in enumerate(limited))  # fmt: skip
    return NodePlan(plan.node, device, "structural", rules)


def run_agent(remote: Remote, host: Host, verb: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Run one agent verb on a host (as root) and return its JSON answer; failures are one `UserError` line."""
    python = sys.executable if host.local and not host.python else (host.python or "python3")
    cmd = f"{shlex.quote(python)} -m netem.userspace.agent {verb} {encode(dict(spec))}"
    res = remote.run(host, cmd, root=True)
    line = (res.stdout.strip().splitlines() or [""])[-1]
    try:
        out = json.loads(line)
    except json.JSONDecodeError:
        detail = (res.stderr or res.stdout).strip().splitlines()
        raise UserError(f"host {host.name}: netem agent {verb} failed: {detail[-1] if detail else res.exit_code} "
                        f"(is gesscale's netem package importable by {python}? set netem_python)") from None
    if "error" in out:
        raise UserError(f"host {host.name}: {verb}: {out['error']}")
    return out


class UserspaceService:
    """Apply a map's userspace plans to hosts and watch them; one object per run."""

    def __init__(self, hosts: Mapping[str, Host], plans: Mapping[str, UserspaceNodePlan], remote: Remote,
                 devices: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.hosts = dict(hosts)
        self.plans = dict(plans)
        self.remote = remote
        self.devices = dict(devices or {})
        self._last: dict[str, dict[str, Any]] = {}
        for node, plan in self.plans.items():
            if self.hosts[node].local and any(x.bandwidth_mbit for x in plan.links):
                raise UserError(f"node {node}: bandwidth limits need an interface of the node's own; local hosts "
                                "share loopback (use namespace or SSH hosts, or drop bandwidth_mbit)")  # fmt: skip

    def _agent(self, node: str, verb: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        return run_agent(self.remote, self.hosts[node], verb, spec)

    def _each(self, work: Any) -> dict[str, Any]:
        nodes = [self.hosts[n] for n in self.plans]
        return on_each(nodes, lambda h: work(h.name))

    def apply(self) -> dict[str, dict[str, Any]]:
        """Apply every node's plan (idempotent; a changed plan reloads the running daemon without a gap)."""
        def one(node: str) -> dict[str, Any]:
            out = self._agent(node, "apply", self.plans[node].spec())
            shaping = shaping_plan(self.plans[node], self.devices.get(node, ""))
            if shaping is not None:
                res = self.remote.run(self.hosts[node], shaping.apply_script(), root=True)
                if not res.ok:
                    raise UserError(f"host {node}: bandwidth classes failed: {(res.stderr or res.stdout).strip()}")
            return out

        return self._each(one)

    def update(self, plans: Mapping[str, UserspaceNodePlan]) -> dict[str, dict[str, Any]]:
        """New values (a map's `changes:` at some time) for the running daemons: same rules, SIGHUP."""
        for node, plan in plans.items():
            if plan.queue != self.plans[node].queue or plan.label != self.plans[node].label:
                raise UserError(f"node {node}: an update cannot change the queue or tag; clear and apply")
        self.plans.update(plans)
        return self.apply()

    def clear(self) -> dict[str, dict[str, Any]]:
        """Remove every node's tagged rules, daemons and state (and its bandwidth classes)."""
        def one(node: str) -> dict[str, Any]:
            plan = self.plans[node]
            out = self._agent(node, "clear", {"label": plan.label, "state_dir": plan.state_dir})
            shaping = shaping_plan(plan, self.devices.get(node, ""))
            if shaping is not None:
                self.remote.run(self.hosts[node], shaping.clear_script(), root=True)
            return out

        return self._each(one)

    def snapshots(self) -> dict[str, dict[str, Any]]:
        """Each node's health snapshot (netem.userspace.agent health)."""
        return self._each(lambda n: self._agent(n, "health", self.plans[n].spec()))

    def health(self) -> list[Health]:
        """Each node's verdict; the progress check compares with the snapshot of the previous call."""
        snaps = self.snapshots()
        out = []
        for node, snap in snaps.items():
            expected = len(self.plans[node].rules())
            out.append(judge_health(node, snap, expected, self._last.get(node)))
        self._last = snaps
        return out

    def restart(self, nodes: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Start the daemons of `nodes` (default: every node) again from their link tables."""
        chosen = nodes or list(self.plans)
        return {n: self._agent(n, "restart", self.plans[n].spec()) for n in chosen}

    def with_python(self, python: str | None) -> UserspaceService:
        """The same service with `python` as every SSH host's interpreter (CLI --python)."""
        if python:
            self.hosts = {n: h if h.local else replace(h, python=python) for n, h in self.hosts.items()}
        return self
