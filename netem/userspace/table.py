"""The delay daemon's link table: which link a queued packet belongs to, and what that link does to it.

The table is a JSON document written by whoever starts the daemon, re-read on SIGHUP::

    {"queue": 4000,                       # NFQUEUE number the daemon binds
     "reorder": false,                    # may jitter reorder the packets of one flow? (see netem.userspace.model)
     "mark_mask": 268369920, "mark_shift": 16,   # optional: classify by packet mark (the testbed's plan)
     "links": {"1": {"src": "a", "dst": "b", "delay_ms": 10.0, "jitter_ms": 1.0, "loss_pct": 0.5,
                     "src_addr": "127.0.0.51", "dst_addr": "127.0.0.52"}}}

Without a mark mask, a packet is matched by the (source, destination) IPv4 addresses of its header, which is what
`gesscale netem` uses (one rule per peer, `-s SELF -d PEER`). `delay_ms` is how long the daemon holds each packet
of the link (the one-way delay: rtt/2 for `gesscale netem`, a whole RTT for the testbed, which delays one
direction only).
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_DELAY_MS = 60_000.0


class TableError(ValueError):
    """The link table is not valid (the daemon refuses it and keeps the one it has)."""


@dataclass(frozen=True)
class LinkSpec:
    """What the daemon does to the packets of one link: hold `delay_ms` ± `jitter_ms`, drop `loss_pct` %."""

    link_id: int
    src: str
    dst: str
    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    src_addr: str | None = None
    dst_addr: str | None = None


@dataclass(frozen=True)
class LinkTable:
    """All links of one daemon and how packets are matched to them."""

    queue: int
    links: dict[int, LinkSpec]
    reorder: bool = False
    mark_mask: int = 0
    mark_shift: int = 0
    by_addr: dict[bytes, LinkSpec] = field(default_factory=dict, repr=False)

    def classify(self, header: bytes, mark: int = 0) -> LinkSpec | None:
        """The link of a packet from its IPv4 header (first bytes) or its mark; None: not ours, pass it on."""
        if self.mark_mask:
            return self.links.get((mark & self.mark_mask) >> self.mark_shift)
        return self.by_addr.get(header[12:20])


def flow_key(header: bytes) -> bytes:
    """What identifies a packet's flow: protocol, addresses and, for TCP/UDP, the two ports, for ICMP the echo
    identifier (one per ping process: on the testbed, pings from several nodes share the addresses)."""
    ihl = (header[0] & 0x0F) * 4
    if header[9] in (6, 17) and len(header) >= ihl + 4:
        return header[9:10] + header[12:20] + header[ihl : ihl + 4]
    if header[9] == 1 and len(header) >= ihl + 6:
        return header[9:10] + header[12:20] + header[ihl + 4 : ihl + 6]
    return header[9:10] + header[12:20]


def _number(raw: Mapping[str, Any], key: str, where: str, upper: float, default: float | None = None) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TableError(f"{where}: {key} must be a number, got {value!r}")
    if not 0 <= value <= upper:
        raise TableError(f"{where}: {key} = {value} outside 0..{upper:g}")
    return float(value)


def _address(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise TableError(f"{where}: {key} {value!r} is not an IPv4 address") from None


def table_from_dict(doc: Any) -> LinkTable:
    """Validate a link table document (see the module docstring) into a `LinkTable`."""
    if not isinstance(doc, Mapping):
        raise TableError("the link table must be a JSON object")
    queue = doc.get("queue")
    if isinstance(queue, bool) or not isinstance(queue, int) or not 0 <= queue <= 65535:
        raise TableError(f"queue must be an integer 0..65535, got {queue!r}")
    mask, shift = doc.get("mark_mask", 0), doc.get("mark_shift", 0)
    if not isinstance(mask, int) or not isinstance(shift, int) or not 0 <= mask < 2**32 or not 0 <= shift < 32:
        raise TableError("mark_mask/mark_shift must be a 32-bit mask and a shift 0..31")
    raw_links = doc.get("links", {})
    if not isinstance(raw_links, Mapping):
        raise TableError("links must be an object keyed by link id")
    links: dict[int, LinkSpec] = {}
    by_addr: dict[bytes, LinkSpec] = {}
    for key, raw in raw_links.items():
        where = f"link {key}"
        if not str(key).isdigit() or not isinstance(raw, Mapping):
            raise TableError(f"{where}: ids are integers, values objects")
        delay = _number(raw, "delay_ms", where, MAX_DELAY_MS)
        spec = LinkSpec(
            int(key), str(raw.get("src", "")), str(raw.get("dst", "")), delay,
            _number(raw, "jitter_ms", where, MAX_DELAY_MS, 0.0), _number(raw, "loss_pct", where, 100.0, 0.0),
            _address(raw, "src_addr", where), _address(raw, "dst_addr", where),
        )  # fmt: skip
        if spec.jitter_ms > spec.delay_ms:
            raise TableError(f"{where}: jitter_ms {spec.jitter_ms} above delay_ms {spec.delay_ms}")
        links[spec.link_id] = spec
        if not mask:
            if spec.src_addr is None or spec.dst_addr is None:
                raise TableError(f"{where}: src_addr and dst_addr are needed without a mark mask")
            pair = ipaddress.IPv4Address(spec.src_addr).packed + ipaddress.IPv4Address(spec.dst_addr).packed
            if pair in by_addr:
                raise TableError(f"{where}: pair {spec.src_addr} -> {spec.dst_addr} listed twice")
            by_addr[pair] = spec
    return LinkTable(queue, links, bool(doc.get("reorder", False)), mask, shift, by_addr)


def load_table(path: str | Path) -> LinkTable:
    """Read and validate a link table file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise TableError(f"{path}: {err}") from None
    return table_from_dict(doc)
