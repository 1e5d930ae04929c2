"""One node's userspace emulation, as a pure plan: tagged NFQUEUE rules, the daemon's link table, its state dir.

For node A (address SELF) and every peer B with a delay, jitter, loss or outages, one rule in the mangle table::

    iptables -t mangle -A OUTPUT -s SELF/32 -d B/32 -m comment --comment gesscale-netem:TAG:A \
        -j NFQUEUE --queue-num Q [--queue-bypass]

and one link in the table of A's daemon (bound to Q) holding each such packet rtt/2 ± jitter, dropping loss %,
and dropping every packet while a partition or a flap of the map holds the pair down (its outages, counted from
the plan's `t0_unix`, the wall-clock time of the map's t = 0).
A round trip crosses A's rule one way and B's the other, so it takes the map's RTT. The rule is written exactly
as `iptables -S` prints it back, so a plan already in place is recognised by comparing text. Without
`--queue-bypass` (the default) a dead daemon stalls the pair's packets, which no measurement can mistake for an
emulated WAN; with it, packets pass undelayed and only `health` tells.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from gesscale.errors import UserError
from gesscale.names import check_name
from netem.userspace.launch import LABEL_PREFIX
from netem.userspace.table import Outages

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
IPV4_PATTERN = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
STATE_ROOT = "/run/gesscale-netem"
QUEUE_BASE = 4000  # node i of the map binds QUEUE_BASE + i (the testbed uses 3100-3199)
CONFIG_NAME = "links.json"


def check_tag(tag: str) -> str:
    """A tag names one emulation; `tb<digits>` is the testbed's (its stale sweep owns those)."""
    check_name("tag", tag, "netem tag")
    if re.match(r"^tb\d", tag):
        raise UserError(f"netem tag {tag!r}: tags starting with 'tb' and a digit belong to the local testbed")
    return tag


def check_ipv4(address: str, what: str) -> str:
    """An IPv4 literal (the only thing a rule's -s/-d may carry)."""
    m = IPV4_PATTERN.match(address)
    if not m or not all(0 <= int(x) <= 255 for x in m.groups()):
        raise UserError(f"{what}: {address!r} is not an IPv4 address")
    return address


def label_of(tag: str, node: str) -> str:
    """The comment of a node's rules and the tag argument of its daemon."""
    return f"{LABEL_PREFIX}{tag}:{node}"


@dataclass(frozen=True)
class PeerLink:
    """What node → `peer` packets get: a one-way hold of `delay_ms` ± `jitter_ms`, `loss_pct` % dropped, all
    dropped while `outages` hold the pair down."""

    peer: str
    address: str
    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    bandwidth_mbit: float | None = None
    outages: Outages | None = None

    @property
    def queued(self) -> bool:
        """Whether the pair's packets go through the daemon at all."""
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0 or self.outages is not None


@dataclass(frozen=True)
class UserspaceNodePlan:
    """Everything node `node` needs for the userspace engine (pure: text and dicts, no I/O)."""

    node: str
    address: str
    queue: int
    tag: str
    links: tuple[PeerLink, ...]
    reorder: bool = False
    queue_bypass: bool = False
    t0_unix: float | None = None

    @property
    def label(self) -> str:
        """Comment of every rule and tag of the daemon: `gesscale-netem:<tag>:<node>`."""
        return label_of(self.tag, self.node)

    @property
    def state_dir(self) -> str:
        """Where the node's daemon keeps its link table, PID file, counters and log."""
        return f"{STATE_ROOT}/{self.tag}.{self.node}"

    @property
    def config_path(self) -> str:
        """The daemon's link table on the node."""
        return f"{self.state_dir}/{CONFIG_NAME}"

    def rules(self) -> list[list[str]]:
        """iptables arguments (after `-t mangle`) of each rule, as `iptables -S` prints them back."""
        out = []
        for link in self.links:
            if not link.queued:
                continue
            rule = ["-A", "OUTPUT", "-s", f"{self.address}/32", "-d", f"{link.address}/32",
                    "-m", "comment", "--comment", self.label, "-j", "NFQUEUE", "--queue-num", str(self.queue)]
            if self.queue_bypass:
                rule.append("--queue-bypass")
            out.append(rule)  # fmt: skip
        return out

    def rules_text(self) -> str:
        """The rules as shell commands, one a line (what `gesscale netem plan --script` prints)."""
        return "".join(f"iptables -w -t mangle {' '.join(shlex.quote(a) for a in r)}\n" for r in self.rules())

    def table(self) -> dict[str, Any]:
        """The daemon's link table (netem.userspace.table); `t0_unix` only when a link has outages (a table
        without them is the same text at every apply, so a second apply changes nothing)."""
        links = {}
        for i, link in enumerate((x for x in self.links if x.queued), start=1):
            links[str(i)] = {"src": self.node, "dst": link.peer, "delay_ms": link.delay_ms,
                             "jitter_ms": link.jitter_ms, "loss_pct": link.loss_pct,
                             "src_addr": self.address, "dst_addr": link.address}  # fmt: skip
            if link.outages is not None:
                links[str(i)].update(link.outages.to_dict())
        doc: dict[str, Any] = {"queue": self.queue, "reorder": self.reorder, "links": links}
        if any(x.outages is not None for x in self.links):
            if self.t0_unix is None:
                raise ValueError(f"node {self.node}: a plan with outages needs t0_unix (the map's t = 0)")
            doc["t0_unix"] = self.t0_unix
        return doc

    def spec(self) -> dict[str, Any]:
        """What the host agent needs to apply this plan (netem.userspace.agent)."""
        return {"label": self.label, "state_dir": self.state_dir, "queue": self.queue, "table": self.table(),
                "rules": self.rules()}

    def describe(self) -> str:
        """Human-readable summary: one line per peer."""
        mode = "reorder allowed" if self.reorder else "per-flow order kept"
        head = f"{self.node} {self.address} (userspace, NFQUEUE {self.queue}, {mode}, tag {self.label})"
        rows = []
        for x in self.links:
            bw = f"  rate {x.bandwidth_mbit:g} Mbit/s" if x.bandwidth_mbit else ""
            rows.append(f"  -> {x.peer:<12} {x.address:<15} hold {x.delay_ms:>8.3f} ms ± {x.jitter_ms:g} ms  "
                        f"loss {x.loss_pct:g}%{bw}")  # fmt: skip
            if x.outages is not None:
                rows.append(f"     {'':<12} {'':<15} {x.outages.describe()} (map time)")
        return "\n".join([head, *rows])


def build_userspace_plan(node: str, address: str, index: int, tag: str, peers: list[PeerLink],
                         reorder: bool = False, queue_bypass: bool = False,
                         t0_unix: float | None = None) -> UserspaceNodePlan:
    """A node's plan; every value that reaches a rule is checked against a strict pattern here."""
    check_tag(tag)
    if not NAME_PATTERN.match(node):
        raise UserError(f"node name {node!r}: use letters, digits, '.', '-' or '_' (at most 40)")
    check_ipv4(address, f"node {node}")
    for p in peers:
        check_ipv4(p.address, f"node {p.peer}")
    queue = QUEUE_BASE + index
    if queue > 65535:
        raise UserError(f"too many nodes for NFQUEUE numbers ({index + 1})")
    return UserspaceNodePlan(node, address, queue, tag, tuple(peers), reorder, queue_bypass, t0_unix)


def parse_rules(text: str, label: str) -> list[tuple[list[str], int]]:
    """Our rules in `iptables -t mangle -v -S OUTPUT` output: (arguments without counters, packets matched).

    A rule is ours when its comment is `label` exactly, or starts with `label` when the label ends with ':'
    (every node of a tag); nothing else is ever returned, so nothing else is ever deleted.
    """
    found = []
    for line in text.splitlines():
        if not line.startswith("-A "):
            continue
        args = shlex.split(line)
        try:
            comment = args[args.index("--comment") + 1]
        except (ValueError, IndexError):
            continue
        if comment != label and not (label.endswith(":") and comment.startswith(label)):
            continue
        packets = 0
        if "-c" in args:
            i = args.index("-c")
            packets = int(args[i + 1])
            args = args[:i] + args[i + 3 :]
        found.append((args, packets))
    return found
