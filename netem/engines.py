"""Two engines behind one latency map: which one a run uses, and the userspace engine's per-node plans (pure).

- `kernel`: per destination an htb class and a `netem` leaf (`netem.plan`), the reference where the kernel has
  sch_netem (Raspberry Pi OS does).
- `userspace`: per destination a tagged NFQUEUE rule and a delay daemon (`netem.userspace`), with htb classes
  only for pairs with a bandwidth limit; for kernels without netem (containers, CI runners, this machine).
- `auto` (the default): `kernel` when every host's probe (a netem qdisc in a throwaway namespace, `netem.probe`)
  succeeds, else `userspace`; always `userspace` for local hosts, which share one interface (loopback) that a
  per-node tc tree cannot split.

Only the userspace engine applies the map's link events (`partition`, `flap`: docs/events.md): each pair they
name gets the same outages in both directions' links, so the pair cannot exchange packets while it is down.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from gesscale.errors import UserError
from gesscale.events import FogEvent
from gesscale.latency_map import LatencyMap
from netem.hosts import Host
from netem.probe import NetemSupport
from netem.userspace.rules import PeerLink, UserspaceNodePlan, build_userspace_plan
from netem.userspace.table import MAX_OUTAGES, Flap, Outages

ENGINES = ("auto", "kernel", "userspace")
DEFAULT_TAG = "wan"
LINK_EVENTS = ("partition", "flap")  # the fog events a network engine applies (the userspace engine)


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


def pair_outages(events: Iterable[FogEvent]) -> dict[frozenset[str], Outages]:
    """The outages of every pair a `partition` or `flap` event names, in seconds of map time (the other kinds are
    node events: no network engine applies them). A partition is a window [t_s, t_s + duration_s) (open when it
    never heals); a flap keeps its period and down time (until t_s + duration_s, or for ever)."""
    windows: dict[frozenset[str], list[tuple[float, float]]] = {}
    flaps: dict[frozenset[str], list[Flap]] = {}
    for e in events:
        end = math.inf if e.duration_s is None else e.t_s + e.duration_s
        if e.kind == "partition":
            for a, b in e.pairs:
                windows.setdefault(frozenset((a, b)), []).append((e.t_s, end))
        elif e.kind == "flap":
            assert e.period_s is not None and e.down_s is not None
            flaps.setdefault(frozenset(e.nodes), []).append(Flap(e.t_s, e.period_s, e.down_s, end))
    out = {}
    for pair in {*windows, *flaps}:
        if len(windows.get(pair, ())) + len(flaps.get(pair, ())) > MAX_OUTAGES:
            raise UserError(f"pair {' - '.join(sorted(pair))}: more than {MAX_OUTAGES} partitions and flaps")
        out[pair] = Outages(tuple(windows.get(pair, ())), tuple(flaps.get(pair, ())))
    return out


def userspace_plans(lmap: LatencyMap, hosts: Mapping[str, Host], tag: str = DEFAULT_TAG, reorder: bool = False,
                    queue_bypass: bool = False, t0_unix: float | None = None) -> dict[str, UserspaceNodePlan]:
    """Each node's userspace plan: hold rtt/2 ± jitter toward every peer, drop loss % (each direction), and drop
    everything while the map's partitions and flaps hold the pair down, from `t0_unix` (the wall-clock time of
    the map's t = 0; needed for the link tables of a map with such events)."""
    names = lmap.names
    outages = pair_outages(lmap.events)
    plans = {}
    for index, node in enumerate(names):
        peers = []
        for peer in names:
            if peer == node:
                continue
            link = lmap.link(node, peer)
            cut = outages.get(frozenset((node, peer))) if outages else None
            peers.append(PeerLink(peer, hosts[peer].address or "", link.rtt_ms / 2.0, link.jitter_ms, link.loss_pct,
                                  link.bandwidth_mbit, cut))  # fmt: skip
        plans[node] = build_userspace_plan(node, hosts[node].address or "", index, tag, peers, reorder, queue_bypass,
                                           t0_unix)  # fmt: skip
    return plans
