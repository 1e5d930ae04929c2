"""The delay daemon's link table: which link a queued packet belongs to, and what that link does to it.

The table is a JSON document written by whoever starts the daemon, re-read on SIGHUP::

    {"queue": 4000,                       # NFQUEUE number the daemon binds
     "reorder": false,                    # may jitter reorder the packets of one flow? (see netem.userspace.model)
     "mark_mask": 268369920, "mark_shift": 16,   # optional: classify by packet mark (the testbed's plan)
     "t0_unix": 1795000000.0,             # optional: the wall-clock time of map time 0 (needed with outages)
     "links": {"1": {"src": "a", "dst": "b", "delay_ms": 10.0, "jitter_ms": 1.0, "loss_pct": 0.5,
                     "src_addr": "127.0.0.51", "dst_addr": "127.0.0.52",
                     "down": [[60, 90], [300, null]],                  # optional: outage windows [from_s, to_s)
                     "flaps": [{"from_s": 120, "period_s": 10, "down_s": 2, "until_s": 180}]}}}  # optional

Without a mark mask, a packet is matched by the (source, destination) IPv4 addresses of its header, which is what
`gesscale netem` uses (one rule per peer, `-s SELF -d PEER`). `delay_ms` is how long the daemon holds each packet
of the link (the one-way delay: rtt/2 for `gesscale netem`, a whole RTT for the testbed, which delays one
direction only).

Outages (a partition or a flap of the map's events, docs/events.md) are in seconds of map time, whose 0 is
`t0_unix`: a link is down in each `down` window [from_s, to_s) (`to_s` null: it never heals) and, for each flap,
in the first `down_s` of every `period_s` from `from_s` until `until_s` (null: for ever). The daemon drops the
packets that reach a link while it is down (`Outages.down_at`: a bisection over the merged windows and one
modulo per flap, per packet of such a link only).
"""

from __future__ import annotations

import ipaddress
import json
import math
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_DELAY_MS = 60_000.0
MAX_MAP_S = 1e9  # outage times and flap periods, in seconds of map time (about 31 years)
MAX_OUTAGES = 10_000  # windows and flaps per link
MAX_T0_UNIX = 2.0**33  # the year 2242


class TableError(ValueError):
    """The link table is not valid (the daemon refuses it and keeps the one it has)."""


def _end(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:g}"


@dataclass(frozen=True)
class Flap:
    """A link down for the first `down_s` of every `period_s` from `from_s` until `until_s` (map seconds)."""

    from_s: float
    period_s: float
    down_s: float
    until_s: float = math.inf

    def to_dict(self) -> dict[str, float | None]:
        """The flap as the link table writes it (`until_s` null: for ever)."""
        return {"from_s": self.from_s, "period_s": self.period_s, "down_s": self.down_s,
                "until_s": None if math.isinf(self.until_s) else self.until_s}  # fmt: skip


@dataclass(frozen=True)
class Outages:
    """When one link is down, in seconds of map time: windows [from_s, to_s) (to_s inf: never heals) and flaps.

    The windows are kept sorted and merged, so `down_at` bisects them; a flap is arithmetic, never expanded."""

    windows: tuple[tuple[float, float], ...] = ()
    flaps: tuple[Flap, ...] = ()
    _starts: tuple[float, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        merged: list[list[float]] = []
        for start, end in sorted(self.windows):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        object.__setattr__(self, "windows", tuple((a, b) for a, b in merged))
        object.__setattr__(self, "_starts", tuple(a for a, _ in merged))

    def down_at(self, t: float) -> bool:
        """Whether the link is down at map time `t` (a window's end and a flap's down phase end are up)."""
        if self._starts:
            k = bisect_right(self._starts, t)
            if k and t < self.windows[k - 1][1]:
                return True
        for f in self.flaps:  # noqa: SIM110 (a loop, not a generator per packet)
            if f.from_s <= t < f.until_s and (t - f.from_s) % f.period_s < f.down_s:
                return True
        return False

    def to_dict(self) -> dict[str, Any]:
        """The link table's `down` and `flaps` keys (only those that hold something)."""
        out: dict[str, Any] = {}
        if self.windows:
            out["down"] = [[a, None if math.isinf(b) else b] for a, b in self.windows]
        if self.flaps:
            out["flaps"] = [f.to_dict() for f in self.flaps]
        return out

    def describe(self) -> str:
        """One line: the windows and flaps in map seconds."""
        parts = [f"down [{a:g}, {_end(b)}) s" for a, b in self.windows]
        parts += [f"flap from {f.from_s:g} s every {f.period_s:g} s down {f.down_s:g} s until {_end(f.until_s)}"
                  for f in self.flaps]  # fmt: skip
        return "; ".join(parts)


@dataclass(frozen=True)
class LinkSpec:
    """What the daemon does to the packets of one link: hold `delay_ms` ± `jitter_ms`, drop `loss_pct` %, and
    drop everything while `outages` say it is down (None: never down)."""

    link_id: int
    src: str
    dst: str
    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    src_addr: str | None = None
    dst_addr: str | None = None
    outages: Outages | None = None


@dataclass(frozen=True)
class LinkTable:
    """All links of one daemon and how packets are matched to them; `t0_unix` is the wall-clock time of map time
    0, which the links' outages count from (None when no link has any)."""

    queue: int
    links: dict[int, LinkSpec]
    reorder: bool = False
    mark_mask: int = 0
    mark_shift: int = 0
    by_addr: dict[bytes, LinkSpec] = field(default_factory=dict, repr=False)
    t0_unix: float | None = None

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


def _map_time(value: Any, where: str, key: str, *, positive: bool = False, open_end: bool = False) -> float:
    """A time or duration of map seconds in [0, MAX_MAP_S] ((0, ...] when `positive`); None is inf if `open_end`."""
    if value is None and open_end:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TableError(f"{where}: {key} must be a number{' or null' if open_end else ''}, got {value!r}")
    low_ok = value > 0 if positive else value >= 0
    if not low_ok or value > MAX_MAP_S:
        raise TableError(f"{where}: {key} = {value} outside {'(0' if positive else '[0'}, {MAX_MAP_S:g}] s")
    return float(value)


def _outages(raw: Mapping[str, Any], where: str) -> Outages | None:
    """A link's `down` windows and `flaps`, validated (None when it has neither)."""
    down, flaps = raw.get("down"), raw.get("flaps")
    if down is None and flaps is None:
        return None
    for key, value in (("down", down), ("flaps", flaps)):
        if value is not None and not isinstance(value, list):
            raise TableError(f"{where}: {key} must be a list, got {type(value).__name__}")
    if len(down or ()) + len(flaps or ()) > MAX_OUTAGES:
        raise TableError(f"{where}: more than {MAX_OUTAGES} down windows and flaps")
    windows = []
    for i, w in enumerate(down or ()):
        at = f"{where}: down[{i}]"
        if not isinstance(w, list) or len(w) != 2:
            raise TableError(f"{at} must be [from_s, to_s] (to_s null: never heals), got {w!r}")
        start, end = _map_time(w[0], at, "from_s"), _map_time(w[1], at, "to_s", open_end=True)
        if end <= start:
            raise TableError(f"{at}: to_s {end:g} is not after from_s {start:g}")
        windows.append((start, end))
    parsed = []
    for i, f in enumerate(flaps or ()):
        at = f"{where}: flaps[{i}]"
        if not isinstance(f, Mapping):
            raise TableError(f"{at} must be an object {{from_s, period_s, down_s, until_s}}, got {f!r}")
        unknown = sorted(set(f) - {"from_s", "period_s", "down_s", "until_s"})
        if unknown:
            raise TableError(f"{at}: unknown key {unknown[0]!r}")
        start = _map_time(f.get("from_s"), at, "from_s")
        period = _map_time(f.get("period_s"), at, "period_s", positive=True)
        down_s = _map_time(f.get("down_s"), at, "down_s", positive=True)
        until = _map_time(f.get("until_s"), at, "until_s", open_end=True)
        if down_s >= period:
            raise TableError(f"{at}: down_s {down_s:g} is not below period_s {period:g}")
        if until <= start:
            raise TableError(f"{at}: until_s {until:g} is not after from_s {start:g}")
        parsed.append(Flap(start, period, down_s, until))
    return Outages(tuple(windows), tuple(parsed)) if windows or parsed else None


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
            _address(raw, "src_addr", where), _address(raw, "dst_addr", where), _outages(raw, where),
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
    t0 = doc.get("t0_unix")
    if t0 is not None and (isinstance(t0, bool) or not isinstance(t0, int | float) or not 0 <= t0 <= MAX_T0_UNIX):
        raise TableError(f"t0_unix must be a wall-clock time in seconds (0..{MAX_T0_UNIX:g}), got {t0!r}")
    if t0 is None and any(s.outages is not None for s in links.values()):
        raise TableError("t0_unix (the wall-clock time of map time 0) is needed when a link has down or flaps")
    return LinkTable(queue, links, bool(doc.get("reorder", False)), mask, shift, by_addr,
                     None if t0 is None else float(t0))  # fmt: skip


def load_table(path: str | Path) -> LinkTable:
    """Read and validate a link table file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise TableError(f"{path}: {err}") from None
    return table_from_dict(doc)
