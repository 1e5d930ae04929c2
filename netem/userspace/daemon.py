"""The delay daemon: binds one NFQUEUE, holds each queued packet for its link's delay, then accepts it.

One thread, one loop (no hand-offs between threads, no lock per packet): wait with `select` until a packet comes
or the earliest held packet is due; read every packet waiting (up to a bound), classify it, ask the
`ReleaseModel` when to release it (or drop it at once, for loss) and put it in the `ReleaseQueue`; then give one
buffer of ACCEPT verdicts for all that is due (netem.userspace.nfq speaks nfnetlink_queue directly). Signals
wake the loop through a wakeup socket: SIGHUP re-reads the link table (new delays apply to packets that arrive
afterwards; a table with errors is refused and the old one kept; the counters file says which, at once),
SIGTERM/SIGINT release every held packet and exit. Counters are rewritten twice a second.

Outages (a partition or a flap, netem.userspace.table): a packet that reaches a link while the link is down, at
its arrival's map time (monotonic clock shifted by the table's `t0_unix`), is dropped at once (NF_DROP, in the
same buffer as the loss drops) and counted as `partitioned`, apart from the random loss (`dropped`). Packets
held before the outage began still leave when due (they were past the cut). A link without outages costs one
attribute test per packet.

The queue has no bypass and no fail-open: while the daemon is away its links stall. When the socket's buffer
overruns (ENOBUFS) the kernel has dropped packets; the daemon counts that (`overflows`) and logs it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import time
from pathlib import Path
from typing import Any

from netem.userspace.launch import pid_file, stats_file
from netem.userspace.model import ReleaseModel
from netem.userspace.nfq import NfQueue, Packet
from netem.userspace.schedule import ReleaseQueue
from netem.userspace.table import LinkTable, TableError, flow_key, load_table

log = logging.getLogger("netem.userspace")

COPY_BYTES = 128  # IPv4 header with options (60) + ports: all the daemon reads of a packet
QUEUE_MAXLEN = 20_000  # held packets count against the kernel queue's length: leave room for delay x rate
RCVBUF_BYTES = 8 << 20
RECEIVE_BATCH = 256  # packets read before the loop looks at what is due again
RT_PRIORITY = 1  # SCHED_FIFO, lowest real-time priority: a due packet goes out when due, not after a time slice
NICE = -10  # where real-time scheduling is not allowed (a container without CAP_SYS_NICE)
STATS_PERIOD_S = 0.5
FORGET_PERIOD_S = 1.0


def _raise_priority() -> str:
    """Run ahead of ordinary processes, as the kernel's own netem does (it runs in softirq context): a waking
    daemon preempts at once instead of waiting for a busy CPU's current slice to end, which on a loaded machine
    adds milliseconds. The loop sleeps between packets; the kernel's real-time throttling (95 % of each second
    by default) bounds what a flood can take."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
        return f"SCHED_FIFO {RT_PRIORITY}"
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
        return f"nice {NICE}"
    except OSError:
        return "default"


def _t0_monotonic(table: LinkTable) -> float:
    """The monotonic clock's reading at the table's map time 0 (arrival times are monotonic; 0 without outages)."""
    if table.t0_unix is None:
        return 0.0
    return table.t0_unix - (time.time() - time.monotonic())


class DelayDaemon:
    """One daemon: one queue, one link table, counters; see the module docstring."""

    def __init__(self, config: Path, label: str, seed: int | None = None) -> None:
        self.config = Path(config)
        self.label = label
        self.table: LinkTable = load_table(self.config)
        self._t0_mono = _t0_monotonic(self.table)
        self.model = ReleaseModel(self.table.reorder, seed)
        self.counters = {"received": 0, "released": 0, "dropped": 0, "partitioned": 0, "unmatched": 0,
                         "overflows": 0, "reloads": 0, "verdict_errors": 0}  # fmt: skip
        self.reload_error: str | None = None
        self.held = ReleaseQueue()
        self._stop = False

    # -- packet path ---------------------------------------------------------------------------------------

    def _serve(self, queue: NfQueue, wakeup: socket.socket) -> None:
        """The loop of the module docstring, until SIGTERM/SIGINT."""
        held, model, counters = self.held, self.model, self.counters
        wait_on = [queue, wakeup]
        next_stats = next_forget = time.monotonic()
        while not self._stop:
            due_at = held.next_due()
            now = time.monotonic()
            timeout = min(STATS_PERIOD_S, max(0.0, next_stats - now))
            if due_at is not None:
                timeout = min(timeout, max(0.0, due_at - now))
            if timeout > 0:
                ready, _, _ = select.select(wait_on, [], [], timeout)
                if wakeup in ready:
                    with contextlib.suppress(BlockingIOError):
                        wakeup.recv(64)
            arrived = queue.receive(RECEIVE_BATCH)
            if arrived:
                passed, lost = self.admit(arrived)
                if lost:
                    queue.drop(lost)
                if passed:
                    queue.accept(passed)
            now = time.monotonic()
            due = held.pop_due(now)
            if due:
                queue.accept(due)
                counters["released"] += len(due)
            if now >= next_stats:
                self._check_queue(queue)
                self._write_stats()
                next_stats = now + STATS_PERIOD_S
            if now >= next_forget:
                model.forget_before(now)
                next_forget = now + FORGET_PERIOD_S

    def admit(self, arrived: list[tuple[Packet, float]]) -> tuple[list[int], list[int]]:
        """Sort packets just read (each with its monotonic arrival time): hold those of a link until their release
        time, and return (ids to accept now: not ours, ids to drop now: lost, or their link is down)."""
        table, model, held, counters = self.table, self.model, self.held, self.counters
        by_mark = bool(table.mark_mask)
        t0 = self._t0_mono
        passed, lost = [], []
        cut = 0
        for pkt, at in arrived:
            header = pkt.payload
            link = table.classify(header, pkt.mark if by_mark else 0)
            if link is None:
                passed.append(pkt.packet_id)
                continue
            if link.outages is not None and link.outages.down_at(at - t0):
                lost.append(pkt.packet_id)
                cut += 1
                continue
            release = model.release_at(link, flow_key(header), at)
            if release is None:
                lost.append(pkt.packet_id)
            else:
                held.push(release, pkt.packet_id)
        counters["received"] += len(arrived)
        counters["unmatched"] += len(passed)
        counters["dropped"] += len(lost) - cut
        counters["partitioned"] += cut
        return passed, lost

    def _check_queue(self, queue: NfQueue) -> None:
        """Fold the socket's overrun and verdict-error counts into the counters; log new overruns."""
        new = queue.overruns - self.counters["overflows"]
        if new > 0:
            log.warning("NFQUEUE %d: receive buffer overran %d time(s): the kernel dropped packets it could not "
                        "hand over", queue.queue, new)  # fmt: skip
        self.counters["overflows"] = queue.overruns
        self.counters["verdict_errors"] = queue.verdict_errors

    # -- control -------------------------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-read the link table (SIGHUP); keep the current one when the new one is invalid."""
        try:
            table = load_table(self.config)
        except TableError as err:
            self.reload_error = str(err)
            log.error("link table not reloaded: %s", err)
            return
        if table.queue != self.table.queue:
            self.reload_error = f"queue {table.queue} differs from the bound queue {self.table.queue}; restart"
            log.error(self.reload_error)
            return
        self.model.reorder = table.reorder
        self.table = table
        self._t0_mono = _t0_monotonic(table)
        self.reload_error = None
        self.counters["reloads"] += 1
        log.info("link table reloaded: %d links", len(table.links))

    def stats(self) -> dict[str, Any]:
        """Counters and state, as written to the stats file."""
        return {"pid": os.getpid(), "label": self.label, "queue": self.table.queue, "links": len(self.table.links),
                "held": len(self.held), "flows": self.model.flows, **self.counters, "reload_error": self.reload_error,
                "updated": time.time()}  # fmt: skip

    def _write_stats(self) -> None:
        path = stats_file(self.config)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.stats()))
        os.replace(tmp, path)

    def _bind(self) -> NfQueue:
        try:
            return NfQueue(self.table.queue, COPY_BYTES, QUEUE_MAXLEN, RCVBUF_BYTES)
        except OSError as err:
            raise SystemExit(f"cannot bind NFQUEUE {self.table.queue}: {err} (another program bound to it?)") from None

    def run(self) -> None:
        """Bind, serve until SIGTERM/SIGINT, release what is held, exit."""
        queue = self._bind()
        log.info("scheduling: %s", _raise_priority())
        wakeup, wakeup_w = socket.socketpair()
        for s in (wakeup, wakeup_w):
            s.setblocking(False)
        signal.set_wakeup_fd(wakeup_w.fileno(), warn_on_full_buffer=False)

        def on_hup(*_: object) -> None:  # runs in the loop's thread, between two packets
            self.reload()
            self._write_stats()  # how the sender of SIGHUP learns that the new table is in force

        def on_stop(*_: object) -> None:
            self._stop = True

        signal.signal(signal.SIGHUP, on_hup)
        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        pidf = pid_file(self.config)
        pidf.write_text(f"{os.getpid()}\n")
        self._write_stats()
        log.info("bound NFQUEUE %d with %d links", self.table.queue, len(self.table.links))
        try:
            self._serve(queue, wakeup)
        finally:
            with contextlib.suppress(OSError):  # the queue may be gone at shutdown
                rest = self.held.drain()
                queue.accept(rest)
                self.counters["released"] += len(rest)
            self._check_queue(queue)
            self._write_stats()
            queue.close()
            signal.set_wakeup_fd(-1)
            wakeup.close()
            wakeup_w.close()
            with contextlib.suppress(OSError):
                pidf.unlink()
