"""What the testbed's delay daemon is told over a run with fog events: the table updates and the outages (pure).

A live run's events (`gesscale run --events FILE`, `gesscale demo --events FILE`; docs/events.md) are what happens
to the fog, merged into the latency map the WAN emulation follows (`LatencyMap.with_events`); the controller's
map stays the operator's. From that map this module derives, for the links of a testbed's plan
(`gesscale.testbed.wan_plan`):

- the table updates: at every time the schedule changes a link's RTT, jitter or loss, the new values of every
  link, with the links that changed (`table_updates`); the daemon takes each on SIGHUP, keeping the packets it
  holds (`gesscale.testbed.wan.TestbedWan.follow_schedule`);
- the outages: each link between two sites a `partition` or a `flap` names gets the pair's windows and flaps
  (`netem.engines.pair_outages`), in seconds of the run, whose 0 is the table's `t0_unix` (`link_outages`); the
  daemon then cuts and heals the link by itself;
- the pairs that must be queued although their RTT is 0 when the plan is made (a link the schedule delays later,
  or cuts), since a link without a mark cannot be changed by a new table (`pairs_to_queue`).

Node events (crash, leave, join, churn) are not network events: nothing here applies them (`node_events` lists
them); the backend does (`gesscale.testbed.node_events`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gesscale.events import FogEvent
from gesscale.testbed.wan_plan import LinkDelay
from netem.engines import LINK_EVENTS, pair_outages
from netem.userspace.table import Outages

__all__ = ["LINK_EVENTS", "LinkUpdate", "link_outages", "link_values", "node_events", "outage_records",
           "pairs_to_queue", "table_document",
           "table_updates"]


@dataclass(frozen=True)
class LinkUpdate:
    """One rewrite of the daemon's table: at `t_s` seconds into the run, every link's values (`links`, by link
    id) and the links that changed (`changed`: (old, new) pairs)."""

    t_s: float
    links: dict[int, LinkDelay]
    changed: tuple[tuple[LinkDelay, LinkDelay], ...]

    def to_dict(self) -> dict[str, Any]:
        """The update as the run's record writes it (the links that changed, old -> new)."""
        return {"t_s": self.t_s, "links": [
            {"src": new.src, "dst": new.dst, "rtt_ms": [old.delay_ms, new.delay_ms],
             "jitter_ms": [old.jitter_ms, new.jitter_ms], "loss_pct": [old.loss_pct, new.loss_pct]}
            for old, new in self.changed]}


def _extras(lmap: Any, a: str, b: str) -> tuple[float, float]:
    link = getattr(lmap, "link", None)
    if link is None or a == b:
        return 0.0, 0.0
    spec = link(a, b)
    return float(spec.jitter_ms or 0.0), float(spec.loss_pct or 0.0)


def link_values(lmap: Any, links: Mapping[int, LinkDelay]) -> dict[int, LinkDelay]:
    """The plan's links with the RTT, jitter and loss of `lmap` (the map in force at some time)."""
    out = {}
    for link_id, link in links.items():
        delay = lmap.rtt(link.src, link.dst) if link.src != link.dst else 0.0
        jitter, loss = _extras(lmap, link.src, link.dst)
        out[link_id] = replace(link, delay_ms=float(delay), jitter_ms=jitter, loss_pct=loss)
    return out


def table_updates(lmap: Any, links: Mapping[int, LinkDelay]) -> list[LinkUpdate]:
    """Every rewrite of the table the map's schedule calls for, in time order, starting from `links` as they
    are (the map at t = 0); a time whose changes touch none of the plan's links gives no update."""
    current = dict(links)
    updates = []
    for t in lmap.change_times:
        new = link_values(lmap.at(t), current)
        changed = tuple((current[i], new[i]) for i in current if new[i] != current[i])
        if changed:
            updates.append(LinkUpdate(float(t), new, changed))
            current = new
    return updates


def link_outages(events: Iterable[FogEvent], links: Mapping[int, LinkDelay]) -> dict[int, Outages]:
    """The outages of each link whose two sites a partition or a flap names (both directions of a pair get the
    same), in seconds of the run; links of pairs never cut are left out."""
    pairs = pair_outages(events)
    if not pairs:
        return {}
    return {i: pairs[key] for i, link in links.items() if (key := frozenset((link.src, link.dst))) in pairs}


def pairs_to_queue(lmap: Any, sites: Iterable[str]) -> set[tuple[str, str]]:
    """Ordered pairs of distinct `sites` that need a link in the plan although the map at t = 0 gives them RTT,
    jitter and loss 0: the schedule gives them a value later, or a partition or a flap cuts them."""
    sites = list(sites)
    cut = pair_outages(lmap.events)
    out = set()
    maps = [lmap.at(t) for t in lmap.change_times]
    for a in sites:
        for b in sites:
            if a == b:
                continue
            if frozenset((a, b)) in cut or any(m.rtt(a, b) > 0 or any(_extras(m, a, b)) for m in maps):
                out.add((a, b))
    return out


def node_events(events: Iterable[FogEvent]) -> list[FogEvent]:
    """The events no network engine applies (crash, leave, join, churn)."""
    return [e for e in events if e.kind not in LINK_EVENTS]


def table_document(queue: int, mark_mask: int, mark_shift: int, links: Mapping[int, LinkDelay],
                   t0_unix: float | None = None, outages: Mapping[int, Outages] | None = None) -> dict[str, Any]:
    """The daemon's link table (netem.userspace.table) for the testbed's links; the outages (and `t0_unix`, the
    wall-clock time of the run's t = 0 they count from) only once t0 is known: before, no link is ever down."""
    doc: dict[str, Any] = {"queue": queue, "mark_mask": mark_mask, "mark_shift": mark_shift, "links": {}}
    cut = outages if t0_unix is not None and outages else {}
    for link_id, v in links.items():
        entry: dict[str, Any] = {"delay_ms": v.delay_ms, "jitter_ms": v.jitter_ms, "loss_pct": v.loss_pct,
                                 "src": v.src, "dst": v.dst}
        if link_id in cut:
            entry.update(cut[link_id].to_dict())
        doc["links"][str(link_id)] = entry
    if cut:
        doc["t0_unix"] = t0_unix
    return doc


def outage_records(links: Mapping[int, LinkDelay], outages: Mapping[int, Outages]) -> list[dict[str, Any]]:
    """Each cut link with its schedule in seconds of the run, for the run's record."""
    return [{"src": links[i].src, "dst": links[i].dst, **o.to_dict(), "schedule": o.describe()}
            for i, o in sorted(outages.items())]
