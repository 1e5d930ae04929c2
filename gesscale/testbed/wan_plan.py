"""Which packets of the fog-in-a-box testbed get which delay: the pure plan of its WAN emulation.

On the testbed every fog node is a Spark worker on its own loopback address (127.0.0.3K), but a connection that a
node *opens* leaves from 127.0.0.1 like any other (the kernel picks the source address of loopback routes), so
source addresses cannot tell the nodes apart. Sockets can: every process of node K (its worker daemon, from before
it starts, and what the worker launches, by inheritance) runs in the cgroup-v2 group `<parent>/<K>`, and the
netfilter `cgroup` match sees the group of the socket that sends a packet.

The rule: each connection is delayed by the full RTT between the two sites it joins, applied to the packets of
its original direction only (those of the side that opened it; conntrack's `--ctdir ORIGINAL`), nothing on the
replies. A request then waits one RTT for its answer and a TCP handshake takes one RTT, as over a WAN whose delay
is split evenly between the two directions; what differs is only *when* within the round trip the time is spent.
The two ends of a connection are:

- the side that opened it: fog node K when the sending socket is in `<parent>/<K>`, else the site;
- the side it was opened to: fog node J when the destination is J's address, else the site.

The *site* is the node of the latency map that hosts what is not a fog node: the broker, the Spark driver and
master, the producer (on the testbed they all run in the root cgroup on 127.0.0.1). A connection within one site
gets no delay. Packets are marked with a link id (bits of `MARK_MASK` only, so other marks survive) and queued to
the delay daemon, which holds each for its link's delay; `links` says which delay each id stands for.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from gesscale.errors import UserError
from gesscale.names import check_name

MARK_SHIFT = 16
MARK_MASK = 0x0FFF0000  # 4 095 links at most; the low 16 bits stay free for anything else that marks packets


@dataclass(frozen=True)
class LinkDelay:
    """What the delay daemon does to a packet of one link: hold it `delay_ms` (+- `jitter_ms`), drop `loss_pct`."""

    src: str
    dst: str
    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0


@dataclass(frozen=True)
class WanPlan:
    """The iptables rules (mangle table) of one testbed's emulation and the link behind each mark."""

    chain: str
    queue: int
    tag: str
    rules: list[list[str]] = field(default_factory=list)  # arguments after `iptables -t mangle`
    links: dict[int, LinkDelay] = field(default_factory=dict)

    def apply_commands(self) -> list[list[str]]:
        """iptables argument lists, in order: make the chain, fill it, then send traffic into it."""
        return [["-N", self.chain], *(["-A", self.chain, *r] for r in self.rules), ["-A", "OUTPUT", *self.jump()]]

    def jump(self) -> list[str]:
        """The OUTPUT rule that sends each connection's original-direction packets through the chain."""
        return ["-m", "conntrack", "--ctdir", "ORIGINAL", "-m", "comment", "--comment", comment(self.tag),
                "-j", self.chain]

    def clear_commands(self) -> list[list[str]]:
        """iptables argument lists that remove what `apply_commands` made (each may fail if already gone)."""
        return [["-D", "OUTPUT", *self.jump()], ["-F", self.chain], ["-X", self.chain]]


def comment(tag: str) -> str:
    """The comment every rule of a testbed carries: how cleanup finds its own rules and nothing else."""
    return f"gesscale-netem:{tag}"


def chain_name(tag: str) -> str:
    """The mangle chain of one testbed's rules."""
    return f"GS-{tag}"


def choose_site(lmap_rtt: Mapping[tuple[str, str], float], names: Sequence[str], candidates: Sequence[str]) -> str:
    """The default site: among `candidates`, the node whose largest RTT to the testbed's nodes is smallest.

    A broker placed there penalises no fog node more than it must, so what differs between placements is
    mostly their own spread; ties go to the earlier candidate.
    """
    def worst(site: str) -> float:
        return max((lmap_rtt[(site, n)] for n in names if n != site), default=0.0)

    return min(candidates, key=worst)


def build_wan_plan(rtt: Mapping[tuple[str, str], float], extras: Mapping[tuple[str, str], tuple[float, float]],
                   hosts: Mapping[str, str], site: str, cgroup_parent: str, tag: str, queue: int,
                   queued: Collection[tuple[str, str]] = ()) -> WanPlan:
    """The rules and links of a testbed (see the module docstring).

    `rtt[(a, b)]` is the RTT (ms) between two sites, `extras[(a, b)]` their (jitter_ms, loss_pct) when not 0;
    `hosts` maps each fog node to its address, `cgroup_parent` is the v2 path (relative to the hierarchy's root)
    holding one group per fog node. A pair of distinct sites in `queued` gets a link even when its RTT, jitter
    and loss are 0 now (fog events delay or cut it later: `gesscale.testbed.wan_events.pairs_to_queue`).
    """
    check_name("tag", tag, "netem tag")
    if not 0 <= queue <= 65535:
        raise UserError(f"NFQUEUE number {queue} outside 0..65535")
    for name, addr in hosts.items():
        if not re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", addr):
            raise UserError(f"node {name}: {addr!r} is not an IPv4 address")
        check_name("node", name, "testbed node")
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", cgroup_parent):
        raise UserError(f"cgroup path {cgroup_parent!r} has characters a rule cannot carry")
    chain = chain_name(tag)
    note = ["-m", "comment", "--comment", comment(tag)]
    rules: list[list[str]] = []
    links: dict[int, LinkDelay] = {}

    def add(match: list[str], src: str, dst: str) -> None:
        delay = rtt[(src, dst)] if src != dst else 0.0
        jitter, loss = extras.get((src, dst), (0.0, 0.0))
        if delay <= 0 and jitter <= 0 and loss <= 0 and (src == dst or (src, dst) not in queued):
            rules.append([*match, *note, "-j", "RETURN"])  # same site: never queued
            return
        link_id = len(links) + 1
        if link_id << MARK_SHIFT > MARK_MASK:
            raise UserError(f"too many links for one testbed ({link_id})")
        links[link_id] = LinkDelay(src, dst, delay, jitter, loss)
        mark = f"0x{link_id << MARK_SHIFT:x}/0x{MARK_MASK:x}"
        rules.append([*match, *note, "-j", "MARK", "--set-xmark", mark])
        rules.append([*match, *note, "-j", "NFQUEUE", "--queue-num", str(queue)])

    nodes = list(hosts)
    for a in nodes:
        own = ["-m", "cgroup", "--path", f"{cgroup_parent}/{a}"]
        for b in nodes:
            if b != a:
                add([*own, "-d", f"{hosts[b]}/32"], a, b)
        add(own, a, site)  # anything else a fog node opens: the broker, the driver, the master
    for b in nodes:  # opened by the site (the driver to an executor, the master to a worker)
        add(["-d", f"{hosts[b]}/32"], site, b)
    return WanPlan(chain, queue, tag, rules, links)
