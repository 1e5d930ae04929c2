"""The netem verbs on a set of hosts: probe, apply, clear, measure, check classes (EnOSlib-style service).

Plans come from `netem.plan` (pure); commands go through a `netem.remote.Remote`. Every check that can fail
on user input (inventory vs map, addresses, devices, netem availability) runs before the first change.
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass

from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from netem.hosts import Host
from netem.measure import PingStats, Verdict, judge, parse_class_packets, parse_ping, parse_route_device, ping_command
from netem.plan import NodePlan, build_plan
from netem.probe import PROBE_COMMAND, NetemSupport, interpret_probe, missing_netem_message
from netem.remote import Remote, on_each


@dataclass(frozen=True)
class ClassHit:
    """After pinging `dst` from `src`: packets counted in the class for `dst`, and the most in any other class."""

    src: str
    dst: str
    classid: str
    pings: int
    delta: int
    others_max: int

    @property
    def ok(self) -> bool:
        """Every echo request went through the peer's class and no other peer class saw as many packets."""
        return self.delta >= self.pings and self.others_max < self.pings


class NetemService:
    """Apply a latency map to hosts as per-destination `tc` trees, and check what the network does."""

    def __init__(self, hosts: dict[str, Host], lmap: LatencyMap, remote: Remote, mode: str = "netem") -> None:
        self.hosts = hosts
        self.lmap = lmap
        self.remote = remote
        self.mode = mode
        self._plans: dict[str, NodePlan] | None = None

    # -- planning (reads only) -----------------------------------------------------------------------------

    def _device(self, host: Host) -> str:
        if host.device:
            return host.device
        peer = next(self.hosts[n] for n in self.lmap.names if n != host.name)
        res = self.remote.run(host, f"ip -o route get {shlex.quote(peer.address or '')}")
        dev = parse_route_device(res.stdout) if res.ok else None
        if not dev:
            raise UserError(f"host {host.name}: cannot find the interface toward {peer.name}; set netem_device")
        return dev

    def devices(self) -> dict[str, str]:
        """Each host's interface toward its peers (inventory, else `ip route get` on the host; read-only)."""
        return on_each(self.hosts.values(), self._device)

    def plans(self) -> dict[str, NodePlan]:
        """The per-node plans; interfaces not given in the inventory are looked up on the nodes (read-only)."""
        if self._plans is None:
            devices = on_each(self.hosts.values(), self._device)
            addresses = {n: h.address for n, h in self.hosts.items() if h.address}
            self._plans = build_plan(self.lmap, addresses, devices, self.mode)
        return self._plans

    def probe(self) -> list[NetemSupport]:
        """Ask every host whether its kernel has netem (changes nothing on the host)."""

        def one(host: Host) -> NetemSupport:
            res = self.remote.run(host, PROBE_COMMAND + " 2>&1", root=True)
            return interpret_probe(host.name, res.exit_code, res.stdout + res.stderr)

        return list(on_each(self.hosts.values(), one).values())

    # -- changes ---------------------------------------------------------------------------------------------

    def apply(self) -> dict[str, bool]:
        """Apply every node's plan in parallel; a node whose recorded plan is already in place is left alone.

        Returns {node: changed}. In mode "netem", hosts without netem stop everything before any change.
        """
        plans = self.plans()
        if self.mode == "netem":
            results = self.probe()
            if not all(r.netem for r in results):
                raise UserError(missing_netem_message(results))

        def one(host: Host) -> bool:
            plan = plans[host.name]
            script = plan.apply_script()
            marker, dev = shlex.quote(plan.marker_path()), shlex.quote(plan.device)
            current = self.remote.run(host, f"cat {marker} 2>/dev/null; echo '#--'; tc qdisc show dev {dev}")
            recorded, _, qdiscs = current.stdout.partition("#--\n")
            if recorded == script and "qdisc htb 1: root" in qdiscs:
                return False
            # The script travels inside the command (base64), not on stdin: one round trip, nothing to close.
            payload = base64.b64encode(script.encode()).decode()
            folder = shlex.quote(plan.marker_path().rsplit("/", 1)[0])
            res = self.remote.run(
                host, f"mkdir -p {folder} && echo {payload} | base64 -d > {marker} && sh {marker}", root=True
            )
            if not res.ok:
                raise UserError(f"host {host.name}: applying the tc plan failed: {(res.stderr or res.stdout).strip()}")
            return True

        return on_each(self.hosts.values(), one)

    def clear(self) -> None:
        """Remove the tc tree and the recorded plan from every node (nodes without a tree are fine)."""
        plans = self.plans()

        def one(host: Host) -> None:
            res = self.remote.run(host, plans[host.name].clear_script(), root=True)
            if not res.ok:
                raise UserError(f"host {host.name}: clearing tc failed: {(res.stderr or res.stdout).strip()}")

        on_each(self.hosts.values(), one)

    # -- observation ----------------------------------------------------------------------------------------

    def ping_all(self, count: int = 5) -> dict[tuple[str, str], PingStats | None]:
        """Ping every ordered pair (sources in parallel, peers one after another)."""

        def one(host: Host) -> dict[tuple[str, str], PingStats | None]:
            out = {}
            for peer in self.lmap.names:
                if peer != host.name:
                    res = self.remote.run(host, ping_command(self.hosts[peer].address or "", count))
                    out[(host.name, peer)] = parse_ping(res.stdout)
            return out

        merged: dict[tuple[str, str], PingStats | None] = {}
        for part in on_each(self.hosts.values(), one).values():
            merged.update(part)
        return merged

    def measure(self, count: int = 5, tolerance_ms: float = 2.0, tolerance_pct: float = 10.0) -> Verdict:
        """All-pairs RTT against the map, with the verdict for the given tolerance."""
        return judge(self.lmap, self.ping_all(count), tolerance_ms, tolerance_pct)

    def check_classes(self, count: int = 3) -> list[ClassHit]:
        """Ping each peer from each node, one pair at a time, and read which htb class counted the packets.

        Pairs run strictly one after another: a reply from B to A passes B's class for A, so concurrent pings
        would blur the attribution.
        """
        plans = self.plans()
        hits = []
        for src in self.lmap.names:
            host, plan = self.hosts[src], plans[src]
            show = f"tc -s class show dev {shlex.quote(plan.device)}"
            for rule in plan.rules:
                before = parse_class_packets(self.remote.run(host, show).stdout)
                self.remote.run(host, ping_command(rule.address, count, 0.05))
                after = parse_class_packets(self.remote.run(host, show).stdout)
                deltas = {r.classid: after.get(r.classid, 0) - before.get(r.classid, 0) for r in plan.rules}
                others = max((d for c, d in deltas.items() if c != rule.classid), default=0)
                hits.append(ClassHit(src, rule.peer, rule.classid, count, deltas[rule.classid], others))
        return hits
