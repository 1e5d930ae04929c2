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
         (above HASH_MIN_PEERS peers, in a 256-bucket u32 hash table keyed on the address's last octet)

What a kernel holds: htb class minors are 16 bits, so one root takes at most 0xFFFF - 0x10 peers (more is refused
here). A u32 filter list is walked in order for every packet, so a node with thousands of peers would test
thousands of filters per packet; above HASH_MIN_PEERS the filters go into a hash table of 256 buckets (u32's
largest divisor) on the last octet of the destination, and each packet walks one bucket (a 10 000-node map:
about 40 filters) instead of all of them (the u32 hashing-filter recipe, `tc-u32(8)`, "hashkey" and "link").
Plans are built per node (`iter_plans`) from the node's row of RTTs, so a large map never holds every plan.

The structural mode exists because some kernels (this CI machine's among them) ship htb and u32 but not
netem: the same tree is built with a plain FIFO leaf, so that classification can still be checked by class
counters, while delay values are checked on a kernel with netem. The same plan drives the fabric path
(`netem.apply`) and the Ansible role (through `playbooks/filter_plugins/gesscale_netem.py`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

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
HASH_MIN_PEERS = 64  # above this many peers, u32 filters go into a hash table (one bucket walked per packet)
HASH_TABLE = "2:"  # the handle of that table; the root's own u32 table is 800:
HASH_BUCKETS = 256  # u32's largest divisor


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
            cmds.append(self._filter(rule))
        if self.hashed:
            cmds[2:2] = [
                ["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "prio", "1", "handle", HASH_TABLE,
                 "protocol", "ip", "u32", "divisor", str(HASH_BUCKETS)],
                ["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1", "u32",
                 "ht", "800::", "match", "ip", "dst", "0.0.0.0/0", "hashkey", "mask", "0x000000ff", "at", "16",
                 "link", HASH_TABLE],
            ]  # fmt: skip
        return cmds

    @cached_property
    def hashed(self) -> bool:
        """Whether the filters go into a hash table (more than HASH_MIN_PEERS peers, all with IPv4 addresses)."""
        return len(self.rules) > HASH_MIN_PEERS and all(_last_octet(r.address) is not None for r in self.rules)

    def _filter(self, rule: PeerRule) -> list[str]:
        """The u32 filter sending traffic to a peer into its class (in its hash bucket when hashed)."""
        where = ["ht", f"{HASH_TABLE[:-1]}:{_last_octet(rule.address):x}:"] if self.hashed else []
        return ["tc", "filter", "add", "dev", self.device, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1",
                "u32", *where, "match", "ip", "dst", f"{rule.address}/32", "flowid", rule.classid]  # fmt: skip

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


def _last_octet(address: str) -> int | None:
    """The last octet of a dotted IPv4 address (the hash key), None for anything else."""
    parts = address.split(".")
    return int(parts[3]) if len(parts) == 4 and parts[3].isdigit() and int(parts[3]) < 256 else None


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
    return dict(iter_plans(lmap, addresses, devices, mode, nodes, reorder))


def iter_plans(
    lmap: LatencyMap,
    addresses: Mapping[str, str],
    devices: Mapping[str, str],
    mode: str = "netem",
    nodes: list[str] | None = None,
    reorder: bool = False,
) -> Iterator[tuple[str, NodePlan]]:
    """`build_plan` one node at a time: every input is checked before the first plan is yielded, then each plan
    is built from the node's row of RTTs when asked for (a 10 000-node map never holds more than one)."""
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
        raise UserError(f"{lmap.source}: too many nodes for one htb root ({len(names)}; htb class ids are 16 bits, "
                        f"so one root takes at most {0xFFFF - FIRST_PEER_MINOR} peers)")

    return _plans(lmap, addresses, devices, mode, targets, reorder)


def _plans(lmap: LatencyMap, addresses: Mapping[str, str], devices: Mapping[str, str], mode: str,
           targets: list[str], reorder: bool) -> Iterator[tuple[str, NodePlan]]:
    names = lmap.names
    index = lmap.index
    defaults = lmap.link_defaults
    jitter0 = float(defaults.get("jitter_ms") or 0.0)
    loss0 = float(defaults.get("loss_pct") or 0.0)
    bw0 = defaults.get("bandwidth_mbit")
    by_node: dict[str, list[str]] = {}
    for pair in lmap.links:
        a, b = tuple(pair)
        by_node.setdefault(a, []).append(b)
        by_node.setdefault(b, []).append(a)
    for node in targets:
        row = lmap.row(index[node])
        special = set(by_node.get(node, ()))
        rules = []
        for i, peer in enumerate(p for p in names if p != node):
            if peer in special:
                link = lmap.link(node, peer)
                jitter, loss, bw = link.jitter_ms, link.loss_pct, link.bandwidth_mbit
            else:
                jitter, loss, bw = jitter0, loss0, bw0
            rules.append(PeerRule(peer, addresses[peer], float(row[index[peer]]) / 2.0,
                                  f"1:{FIRST_PEER_MINOR + i:x}", jitter, loss, bw))  # fmt: skip
        yield node, NodePlan(node, devices[node], mode, tuple(rules), reorder)
