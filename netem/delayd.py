"""The userspace delay daemon: holds queued packets for their link's delay, for kernels without sch_netem.

iptables rules mark each packet with the id of its link (bits of `mark_mask`, shifted by `mark_shift`) and send
it to an NFQUEUE; this daemon reads the queue (fnfqueue), looks the link up, drops the packet with the link's
loss probability, or else releases it (ACCEPT) once its delay has passed: `delay_ms` plus a jitter drawn
uniformly from [-jitter_ms, +jitter_ms] (netem's default distribution is uniform too).

Order: by default a packet is never released before an earlier packet of the same flow (protocol, addresses
and ports), so jitter delays a TCP stream without reordering it, as a real path mostly does. netem applies its
jitter per packet and so reorders a flow whenever the jitter exceeds the gap between packets (its manual says
to add a rate or use a pfifo child to keep order: tc-netem(8)); `"reorder": true` in the config gives that
behaviour here.

Config (JSON): {"queue": N, "mark_mask": M, "mark_shift": S, "reorder": false,
"links": {"<id>": {"delay_ms": d, "jitter_ms": j, "loss_pct": l}}}. SIGHUP re-reads it (a map's `changes:`),
SIGTERM stops after releasing what it holds. A marked packet of an unknown link passes at once and is counted.
Every second the daemon writes its counters beside the config (`<config>.stats`): the health check reads them.

    python -m netem.delayd --config FILE [--tag gesscale-netem:TAG]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LinkSpec:
    """One link's behaviour in the daemon."""

    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0


@dataclass
class DelayConfig:
    """The daemon's whole configuration (see the module docstring)."""

    queue: int
    mark_mask: int
    mark_shift: int
    links: dict[int, LinkSpec] = field(default_factory=dict)
    reorder: bool = False

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DelayConfig:
        """Parse and check the JSON form; ValueError names what is wrong."""
        try:
            links = {int(k): LinkSpec(float(v["delay_ms"]), float(v.get("jitter_ms", 0.0)),
                                      float(v.get("loss_pct", 0.0))) for k, v in dict(doc["links"]).items()}
            cfg = cls(int(doc["queue"]), int(doc["mark_mask"]), int(doc["mark_shift"]), links,
                      bool(doc.get("reorder", False)))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"bad delay daemon config: {err!r}") from None
        for k, spec in links.items():
            if not (spec.delay_ms >= 0 and spec.jitter_ms >= 0 and 0 <= spec.loss_pct <= 100):
                raise ValueError(f"bad delay daemon config: link {k}: {spec}")
        return cfg


def flow_key(header: bytes) -> bytes:
    """What identifies a packet's flow in its IPv4 header: protocol, addresses, and the TCP/UDP ports or the ICMP
    echo identifier."""
    if len(header) < 20 or header[0] >> 4 != 4:
        return header[:40]
    ihl = (header[0] & 0x0F) * 4
    proto = header[9]
    if proto in (6, 17):  # TCP, UDP: the ports
        ports = header[ihl:ihl + 4]
    elif proto == 1:  # ICMP: the echo identifier (one per ping process)
        ports = header[ihl + 4:ihl + 6]
    else:
        ports = b""
    return bytes([proto]) + header[12:20] + ports


class DelayScheduler:
    """When each packet leaves: pure bookkeeping (no I/O), so it is tested directly.

    `admit` returns the release time of a packet (None: drop it) and keeps, per flow, the latest release time
    given, so that a flow's packets leave in order unless `reorder`.
    """

    def __init__(self, config: DelayConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self.rng = rng or random.Random()
        self._last: dict[bytes, float] = {}
        self.counts = {"queued": 0, "dropped": 0, "unknown": 0}

    def link_of(self, mark: int) -> LinkSpec | None:
        """The link a packet mark stands for."""
        return self.config.links.get((mark & self.config.mark_mask) >> self.config.mark_shift)

    def admit(self, now: float, mark: int, flow: bytes) -> float | None:
        """Release time (s, same clock as `now`) of a packet arriving at `now`, or None to drop it."""
        self.counts["queued"] += 1
        link = self.link_of(mark)
        if link is None:
            self.counts["unknown"] += 1
            return now
        if link.loss_pct > 0 and self.rng.random() * 100.0 < link.loss_pct:
            self.counts["dropped"] += 1
            return None
        delay = link.delay_ms
        if link.jitter_ms > 0:
            delay = max(0.0, delay + self.rng.uniform(-link.jitter_ms, link.jitter_ms))
        release = now + delay / 1000.0
        if not self.config.reorder:
            key = mark.to_bytes(4, "big") + flow  # the same addresses can carry two links (cgroup-matched rules)
            release = max(release, self._last.get(key, 0.0))
            self._last[key] = release
            if len(self._last) > 65536:  # forget flows whose last packet has long left
                self._last = {k: v for k, v in self._last.items() if v > now - 1.0}
        return release


class DelayDaemon:
    """The queue reader and the releaser thread around a `DelayScheduler`."""

    def __init__(self, config_path: Path) -> None:
        self.config_path = config_path
        self.scheduler = DelayScheduler(self._read())
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self.released = 0
        self.late_ms_max = 0.0

    def _read(self) -> DelayConfig:
        return DelayConfig.from_dict(json.loads(self.config_path.read_text()))

    def reload(self) -> None:
        """Take new link values from the config file (the queue number stays)."""
        cfg = self._read()
        cfg.queue = self.scheduler.config.queue
        self.scheduler.config = cfg

    def _release_loop(self) -> None:
        while True:
            with self._cv:
                while not self._heap and not self._stop.is_set():
                    self._cv.wait(0.5)
                if not self._heap and self._stop.is_set():
                    return
                due, _, pkt = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0 and not self._stop.is_set():
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._heap)
            late = (time.monotonic() - due) * 1000.0
            self.late_ms_max = max(self.late_ms_max, late)
            with contextlib.suppress(Exception):  # the queue went away while holding it: nothing to release into
                pkt.accept()
            self.released += 1

    def _write_stats(self, path: Path) -> None:
        while not self._stop.wait(1.0):
            doc = {**self.scheduler.counts, "released": self.released, "held": len(self._heap),
                   "late_ms_max": round(self.late_ms_max, 3), "time": time.time()}
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc))
            tmp.replace(path)

    def run(self) -> None:
        """Bind the queue and serve until SIGTERM/SIGINT."""
        import fnfqueue

        conn = fnfqueue.Connection(packet_size=4096)
        queue = conn.bind(self.scheduler.config.queue)
        queue.set_mode(64, fnfqueue.COPY_PACKET)  # the headers are enough to know the flow
        queue.set_maxlen(65536)  # held packets count against this: a short queue would drop under load

        def stop(signum: int, frame: object) -> None:
            self._stop.set()
            conn.close()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, lambda s, f: self.reload())
        releaser = threading.Thread(target=self._release_loop, name="release", daemon=True)
        releaser.start()
        threading.Thread(target=self._write_stats, args=(Path(f"{self.config_path}.stats"),), daemon=True).start()
        try:
            for pkt in conn:
                now = time.monotonic()
                due = self.scheduler.admit(now, pkt.mark, flow_key(pkt.payload))
                if due is None:
                    pkt.drop()
                elif due <= now:
                    pkt.accept()
                else:
                    with self._cv:
                        self._seq += 1
                        heapq.heappush(self._heap, (due, self._seq, pkt))
                        self._cv.notify()
        finally:
            self._stop.set()
            with self._cv:
                self._cv.notify_all()
            releaser.join(5)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m netem.delayd", description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--tag", default="", help="a label in the command line, to find this daemon again")
    args = ap.parse_args(argv)
    try:
        daemon = DelayDaemon(args.config)
    except (OSError, ValueError) as err:
        print(f"netem.delayd: {err}", file=sys.stderr)
        return 2
    daemon.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
