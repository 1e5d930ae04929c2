"""Per-node `tc` plans from a latency map (pure: no I/O, printable, testable).

Each node gets, on the interface that reaches its peers, an egress delay of rtt/2 toward each peer, so that
a round trip between two nodes crosses two half delays and equals the map (docs/pi-cluster.md §5):

    htb root (handle 1:, unclassified traffic to class 1:1, no delay)
      └─ one htb class per destination (1:10, 1:11, ...), rate = the link's bandwidth (else 10gbit: no shaping)
           └─ leaf qdisc: `netem delay <rtt/2>ms [<jitter>ms] [loss <p>%]`   (mode "netem")
                 └─ with jitter: a `pfifo` child, so jitter does not reorder packets (netem's own
                    queue is time-sorted and would; wiki.linuxfoundation.org/networking/netem)
                      or  `pfifo limit 1000`          (mode "structural": kernels without netem)
      └─ one u32 filter per destination: `match ip dst <peer>/32 flowid <class>`

The structural mode exists because some kernels (this CI machine's among them) ship htb and u32 but not
netem: the same tree is built with a plain FIFO leaf, so that classification can still be checked by class
counters, while delay values are checked on a kernel with netem. The same plan drives the fabric path
(`netem.apply`) and the Ansible role (through `playbooks/filter_plugins/gesscale_netem.py`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.names import check_name
from netem.inventory_fields import check_device, check_ipv4

MODES = ("netem", "structural")
ROOT_HANDLE = "1:"
DEFAULT_CLASS = "1:1"
FIRST_PEER_MINOR = 0x10
CLASS_RATE = "10gbit"  # far above any Pi NIC: the class only classifies, it must never shape
STRUCTURAL_LEAF = "pfifo limit 1000"
MARKER_DIR = "/run/gesscale-netem"  # the applied script is kept here; /run is emptied at boot, like tc state


@dataclass(frozen=True)
class PeerRule:
    """One egress constraint: traffic to `address` (peer `peer`) goes through `classid` with `delay_ms`."""

    peer: str
    address: str
    delay_ms: float
    classid: str
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    bandwidth_mbit: float | None = None

    @property
    def rate(self) -> str:
        """The htb class rate: the link's bandwidth, or a rate far above any NIC (classify only, never shape)."""
        return CLASS_RATE if not self.bandwidth_mbit else f"{_ms(self.bandwidth_mbit * 1000)}kbit"

    @property
    def leaf_handle(self) -> str:
        """Handle of the leaf qdisc under this rule's class (the class minor, as tc handles are hex)."""
        return self.classid.split(":")[1] + ":"


@dataclass(frozen=True)
class NodePlan:
    """Everything one node's interface needs: the device, the mode and one rule per peer."""

    node: str
    device: str
    mode: str
    rules: tuple[PeerRule, ...]
    reorder: bool = False

    def leaf(self, rule: PeerRule) -> str:
        """The leaf qdisc of a rule in this plan's mode."""
        if self.mode == "netem":
            text = f"netem delay {_ms(rule.delay_ms)}ms"
            if rule.jitter_ms:
                text += f" {_ms(rule.jitter_ms)}ms"
            if rule.loss_pct:
                text += f" loss {_ms(rule.loss_pct)}%"
            return text
        return STRUCTURAL_LEAF

    def apply_commands(self) -> list[list[str]]:
        """`tc` argument lists that build the tree from a clean interface (run `clear_commands` first)."""
        dev = self.device
        cmds = [
            ["tc", "qdisc", "add", "dev", dev, "root", "handle", ROOT_HANDLE, "htb", "default", "1"],
            ["tc", "class", "add", "dev", dev, "parent", ROOT_HANDLE, "classid", DEFAULT_CLASS,
             "htb", "rate", CLASS_RATE],
        ]  # fmt: skip
        for rule in self.rules:
            cmds.append(["tc", "class", "add", "dev", dev, "parent", ROOT_HANDLE, "classid", rule.classid,
                         "htb", "rate", rule.rate])  # fmt: skip
            cmds.append(["tc", "qdisc", "add", "dev", dev, "parent", rule.classid, "handle", rule.leaf_handle,
                         *self.leaf(rule).split()])  # fmt: skip
            if self.mode == "netem" and rule.jitter_ms and not self.reorder:
                cmds.append(["tc", "qdisc", "add", "dev", dev, "parent", rule.leaf_handle + "1",
                             *STRUCTURAL_LEAF.split()])  # fmt: skip
            cmds.append(["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1",
                         "u32", "match", "ip", "dst", f"{rule.address}/32", "flowid", rule.classid])  # fmt: skip
        return cmds

    def clear_commands(self) -> list[list[str]]:
        """`tc` argument list that removes the tree (deleting the root deletes classes, leaves and filters)."""
        return [["tc", "qdisc", "del", "dev", self.device, "root"]]

    def marker_path(self) -> str:
        """Where the applied script is recorded on the node, so a re-apply of the same plan can be skipped."""
        return f"{MARKER_DIR}/{self.device}.sh"

    def apply_script(self) -> str:
        """A POSIX shell script, run as root, that applies the plan idempotently: delete, then add.

        `tc qdisc replace` on an existing htb root fails, so the root is always deleted first (an absent root
        is fine). The script is the single artefact both the fabric path and the Ansible role execute. Names,
        addresses and the device are written into its comment lines, so each is checked here again, whoever built
        the plan: a newline would end the comment and start a command.
        """
        check_name("node", self.node, "netem plan: node")
        check_device(self.node, self.device)
        if self.mode not in MODES:
            raise UserError(f"unknown netem mode {self.mode!r}: choose one of {', '.join(MODES)}")
        for r in self.rules:
            check_name("node", r.peer, f"netem plan for {self.node}: peer")
            check_ipv4(r.peer, r.address)
        lines = [
            "#!/bin/sh",
            f"# gesscale netem plan for {self.node} on {self.device}, mode {self.mode}",
            *(f"# {r.peer} {r.address} rtt/2={_ms(r.delay_ms)}ms class {r.classid}" for r in self.rules),
            "set -e",
            _shell(self.clear_commands()[0]) + " 2>/dev/null || true",
            *(_shell(c) for c in self.apply_commands()),
        ]
        return "\n".join(lines) + "\n"

    def clear_script(self) -> str:
        """A POSIX shell script that removes the tree and the applied-plan record (absent tree is fine)."""
        return (
            "#!/bin/sh\n"
            + _shell(self.clear_commands()[0])
            + " 2>/dev/null || true\n"
            + f"rm -f {shlex.quote(self.marker_path())}\n"
        )

    def describe(self) -> str:
        """Human-readable summary: one line per peer."""
        head = f"{self.node} dev {self.device} ({self.mode})"
        rows = [f"  -> {r.peer:<12} {r.address:<15} delay {_ms(r.delay_ms):>8} ms  class {r.classid}"
                for r in self.rules]  # fmt: skip
        return "\n".join([head, *rows])


def _ms(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _shell(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)


def build_plan(
    lmap: LatencyMap,
    addresses: Mapping[str, str],
    devices: Mapping[str, str],
    mode: str = "netem",
    nodes: list[str] | None = None,
    reorder: bool = False,
) -> dict[str, NodePlan]:
    """Plans for the map's nodes (or `nodes`): each gets rtt/2 toward every other node of the map.

    `addresses` gives each node's IPv4 address on the cluster network, `devices` its interface. Every node of
    the map must have both; checking happens here, before anything touches a host.
    """
    if mode not in MODES:
        raise UserError(f"unknown netem mode {mode!r}: choose one of {', '.join(MODES)}")
    names = lmap.names
    missing = [n for n in names if n not in addresses]
    if missing:
        raise UserError(f"{lmap.source}: map node(s) {', '.join(missing)} not in the inventory (or without address)")
    targets = names if nodes is None else nodes
    unknown = [n for n in targets if n not in lmap.nodes]
    if unknown:
        raise UserError(f"{lmap.source}: host(s) {', '.join(unknown)} not in the latency map")
    no_dev = [n for n in targets if not devices.get(n)]
    if no_dev:
        raise UserError(f"no network device known for {', '.join(no_dev)} (set netem_device in the inventory)")
    for n in targets:  # the name goes into the script, its comment and the marker path: a strict pattern only
        check_device(n, devices[n])
    if len(names) > 0xFFFF - FIRST_PEER_MINOR:
        raise UserError(f"{lmap.source}: too many nodes for one htb root ({len(names)})")
    plans: dict[str, NodePlan] = {}
    for node in targets:
        rules = []
        for i, peer in enumerate(p for p in names if p != node):
            link = lmap.link(node, peer)
            rules.append(PeerRule(peer, addresses[peer], link.rtt_ms / 2.0, f"1:{FIRST_PEER_MINOR + i:x}",
                                  link.jitter_ms, link.loss_pct, link.bandwidth_mbit))  # fmt: skip
        plans[node] = NodePlan(node, devices[node], mode, tuple(rules), reorder)
    return plans
