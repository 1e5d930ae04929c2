"""Two engines behind one latency map: which one a run uses, and the userspace engine's per-node plans (pure).

- `kernel`: per destination an htb class and a `netem` leaf (`netem.plan`), the reference where the kernel has
  sch_netem (Raspberry Pi OS does).
- `userspace`: per destination a tagged NFQUEUE rule and a delay daemon (`netem.userspace`), with htb classes
  only for pairs with a bandwidth limit; for kernels without netem (containers, CI runners, this machine).
- `auto` (the default): `kernel` when every host's probe (a netem qdisc in a throwaway namespace, `netem.probe`)
  succeeds, else `userspace`; always `userspace` for local hosts, which share one interface (loopback) that a
  per-node tc tree cannot split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from netem.hosts import Host
from netem.probe import NetemSupport
from netem.userspace.rules import PeerLink, UserspaceNodePlan, build_userspace_plan

ENGINES = ("auto", "kernel", "userspace")
DEFAULT_TAG = "wan"


def check_engine(engine: str) -> str:
    """An engine name the CLI accepts."""
    if engine not in ENGINES:
        raise UserError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return engine


def pick_engine(requested: str, hosts: Sequence[Host], probes: Sequence[NetemSupport] | None) -> tuple[str, str]:
    """The engine to use and why (one line). `probes` may be None when `requested` is not `auto`."""
    check_engine(requested)
    local = [h.name for h in hosts if h.local]
    if requested == "kernel" and local:
        raise UserError(f"the kernel engine needs one interface per node; local host(s) {', '.join(local)} share "
                        "loopback: use --engine userspace")  # fmt: skip
    if requested != "auto":
        return requested, f"--engine {requested}"
    if local:
        return "userspace", "local hosts share loopback"
    if probes is None:
        raise ValueError("auto needs the probe results")
    missing = [p.host for p in probes if not p.netem]
    if not missing:
        return "kernel", "every host has netem"
    return "userspace", f"no netem on {', '.join(missing)}"


def userspace_plans(lmap: LatencyMap, hosts: Mapping[str, Host], tag: str = DEFAULT_TAG, reorder: bool = False,
                    queue_bypass: bool = False) -> dict[str, UserspaceNodePlan]:
    """Each node's userspace plan: hold rtt/2 ± jitter toward every peer, drop loss % (each direction)."""
    names = lmap.names
    plans = {}
    for index, node in enumerate(names):
        peers = []
        for peer in names:
            if peer == node:
                continue
            link = lmap.link(node, peer)
            peers.append(PeerLink(peer, hosts[peer].address or "", link.rtt_ms / 2.0, link.jitter_ms, link.loss_pct,
                                  link.bandwidth_mbit))  # fmt: skip
        plans[node] = build_userspace_plan(node, hosts[node].address or "", index, tag, peers, reorder, queue_bypass)
    return plans
