"""The delay daemon: binds one NFQUEUE, holds each queued packet for its link's delay, then accepts it.

Threads: fnfqueue's reader receives packets; `_receive` (a thread of ours) classifies each one, asks the
`ReleaseModel` when to release it and pushes it on a heap; `_release` pops what is due and gives the ACCEPT
verdict (or DROP for a lost packet, at once). The main thread only handles signals and writes the counters:
SIGHUP re-reads the link table (new delays apply to packets that arrive afterwards; a table with errors is
refused and the old one kept; the counters file says which, at once), SIGTERM/SIGINT release every held packet and exit.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from netem.userspace.launch import pid_file, stats_file
from netem.userspace.model import ReleaseModel
from netem.userspace.table import LinkTable, TableError, flow_key, load_table

log = logging.getLogger("netem.userspace")

COPY_BYTES = 128  # IPv4 header with options (60) + ports: all the daemon reads of a packet
QUEUE_MAXLEN = 20_000  # held packets count against the kernel queue's length: leave room for delay x rate
RCVBUF_BYTES = 8 << 20
NICE = -10  # on a busy machine the releaser must run when its packet is due, not after the CPU hogs
SWITCH_INTERVAL_S = 0.0005  # hand the GIL to the releaser within 0.5 ms (Python's default: 5 ms)
STATS_PERIOD_S = 0.5
FORGET_PERIOD_S = 1.0


class DelayDaemon:
    """One daemon: one queue, one link table, counters; see the module docstring."""

    def __init__(self, config: Path, label: str, seed: int | None = None) -> None:
        self.config = Path(config)
        self.label = label
        self.table: LinkTable = load_table(self.config)
        self.model = ReleaseModel(self.table.reorder, seed)
        self.counters = {"received": 0, "released": 0, "dropped": 0, "unmatched": 0, "overflows": 0, "reloads": 0}
        self.reload_error: str | None = None
        self._heap: list[tuple[float, int, Any]] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._seq = 0
        self._conn: Any = None

    # -- packet path ---------------------------------------------------------------------------------------

    def _receive(self) -> None:
        import fnfqueue

        conn = self._conn
        last_forget = time.monotonic()
        counters = self.counters
        while not self._stop.is_set():
            try:
                for pkt in conn:
                    now = time.monotonic()
                    counters["received"] += 1
                    table = self.table
                    header = pkt.payload
                    link = table.classify(header, pkt.mark if table.mark_mask else 0)
                    if link is None:
                        counters["unmatched"] += 1
                        pkt.accept()
                        continue
                    at = self.model.release_at(link, flow_key(header), now)
                    if at is None:
                        counters["dropped"] += 1
                        pkt.drop()
                        continue
                    with self._cond:
                        self._seq += 1
                        heapq.heappush(self._heap, (at, self._seq, pkt))
                        if self._heap[0][1] == self._seq:
                            self._cond.notify()
                    if now - last_forget > FORGET_PERIOD_S:
                        self.model.forget_before(now)
                        last_forget = now
                return  # the connection was closed
            except fnfqueue.BufferOverflowException:
                counters["overflows"] += 1  # the kernel dropped packets it could not hand over
                conn.reset()

    def _release(self) -> None:
        heap, cond = self._heap, self._cond
        while True:
            with cond:
                while True:
                    if self._stop.is_set() and not heap:
                        return
                    if heap:
                        wait = heap[0][0] - time.monotonic()
                        if wait <= 0 or self._stop.is_set():
                            break
                    else:
                        wait = None
                    cond.wait(wait)
                now = time.monotonic()
                due = []
                while heap and (heap[0][0] <= now or self._stop.is_set()):
                    due.append(heapq.heappop(heap)[2])
            for pkt in due:
                with contextlib.suppress(Exception):  # the queue may be gone at shutdown
                    pkt.accept()
            self.counters["released"] += len(due)

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
        self.reload_error = None
        self.counters["reloads"] += 1
        log.info("link table reloaded: %d links", len(table.links))

    def stats(self) -> dict[str, Any]:
        """Counters and state, as written to the stats file."""
        with self._cond:
            held = len(self._heap)
        return {"pid": os.getpid(), "label": self.label, "queue": self.table.queue, "links": len(self.table.links),
                "held": held, "flows": self.model.flows, **self.counters, "reload_error": self.reload_error,
                "updated": time.time()}  # fmt: skip

    def _write_stats(self) -> None:
        path = stats_file(self.config)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.stats()))
        os.replace(tmp, path)

    def _bind(self) -> Any:
        import fnfqueue

        conn = fnfqueue.Connection(alloc_size=256, chunk_size=32, packet_size=4096)
        with contextlib.suppress(OSError):
            sock = socket.socket(fileno=os.dup(conn._conn.fd))
            sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF_BYTES)  # SO_RCVBUFFORCE (root): fewer overflows
            sock.close()
        try:
            queue = conn.bind(self.table.queue)
        except OSError as err:
            conn.close()
            raise SystemExit(f"cannot bind NFQUEUE {self.table.queue}: {err} (another program bound to it?)") from None
        queue.set_mode(COPY_BYTES, fnfqueue.COPY_PACKET)
        queue.set_maxlen(QUEUE_MAXLEN)
        return conn

    def run(self) -> None:
        """Bind, serve until SIGTERM/SIGINT, release what is held, exit."""
        # Signals go to the main thread only: the threads made below (fnfqueue's reader, ours) inherit this mask,
        # so a SIGHUP can never interrupt their system calls (fnfqueue's reader gives up on EINTR).
        handled = {signal.SIGHUP, signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, handled)
        self._conn = self._bind()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, NICE)  # root only; otherwise the default priority
        def on_hup(*_: object) -> None:  # runs in the main thread at once, also while it waits below
            self.reload()
            self._write_stats()  # how the sender of SIGHUP learns that the new table is in force

        signal.signal(signal.SIGHUP, on_hup)
        signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
        signal.signal(signal.SIGINT, lambda *_: self._stop.set())
        workers = [threading.Thread(target=self._receive, name="receive", daemon=True),
                   threading.Thread(target=self._release, name="release", daemon=True)]  # fmt: skip
        for w in workers:
            w.start()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, handled)
        pidf = pid_file(self.config)
        pidf.write_text(f"{os.getpid()}\n")
        self._write_stats()
        log.info("bound NFQUEUE %d with %d links", self.table.queue, len(self.table.links))
        try:
            while not self._stop.wait(STATS_PERIOD_S):
                self._write_stats()
                if not workers[0].is_alive():
                    log.error("the receiving thread ended; stopping")
                    break
        finally:
            self._stop.set()
            with self._cond:
                self._cond.notify_all()
            workers[1].join(timeout=5)
            self._write_stats()
            self._conn.close()
            with contextlib.suppress(OSError):
                pidf.unlink()
