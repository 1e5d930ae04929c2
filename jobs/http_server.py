"""An HTTP server with a fixed number of worker threads, for the driver's API (jobs/http_api.py).

`ThreadingHTTPServer` starts a thread per connection and keeps it while the connection idles: 300 idle
connections held 300 threads (issue 17). Here one watcher thread waits, with a selector, until a connection has
sent something, and only then hands it to a pool of `workers` threads; a connection that sends nothing within
`idle_timeout_s` is closed without ever holding a worker.

Inside a worker the request (request line, headers, body) must arrive within one deadline, `request_timeout_s`
from the moment the worker took it: every read waits only for what is left of it (`DeadlineReader`), so a client
trickling a byte every few seconds is cut off at the deadline, not kept as long as each byte comes in time
(issue 28: 8 such clients held `GET /metrics` for 40 s with a per-read timeout). And one client address holds
at most `per_client` workers at once: a further request from it is answered 429 and closed at once, so clients
from one address cannot take the whole pool from the others; nor can it fill the waiting connections: past a
quarter of `MAX_WAITING`, its own oldest waiting connection is closed, not another client's.
"""

from __future__ import annotations

import io
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer

MAX_WAITING = 1024  # connections waiting for their first byte; beyond that the oldest is closed
WAITING_SHARE = 4  # one client address has at most MAX_WAITING / 4 of them; beyond that its own oldest is closed
_BUSY_BODY = b'{"error": "too many connections from this address"}'
_BUSY = (b"HTTP/1.0 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))  # fmt: skip


class DeadlineReader(io.RawIOBase):
    """A socket's reading side in which every read waits only until one deadline (`TimeoutError` after it)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self.deadline = deadline

    def readable(self) -> bool:
        """Always: this is the reading side."""
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def,override]
        """Read what has arrived, waiting at most until the deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive within its deadline")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class PooledHTTPServer(HTTPServer):
    """HTTPServer whose requests run on a bounded pool, idle connections on no thread at all."""

    request_queue_size = 128  # listen backlog: a burst of connections is accepted, not left to SYN retries

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, workers: int = 8,
                 idle_timeout_s: float = 10.0, request_timeout_s: float = 10.0,
                 per_client: int | None = None) -> None:  # fmt: skip
        super().__init__(address, handler)
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self.per_client = per_client if per_client is not None else max(1, workers // 2)
        self._active: dict[str, int] = {}  # client address -> connections on a worker now
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gesscale-api")
        self._selector = selectors.DefaultSelector()
        self._waiting: dict[socket.socket, tuple[float, tuple]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._watcher = threading.Thread(target=self._watch, name="gesscale-api-watch", daemon=True)
        self._watcher.start()

    def process_request(self, request, client_address) -> None:  # type: ignore[override]
        """Park the new connection until it is readable (called by serve_forever's thread)."""
        with self._lock:
            client = str(client_address[0]) if client_address else ""
            mine = [s for s, (_, a) in self._waiting.items() if (str(a[0]) if a else "") == client]
            if len(mine) >= max(1, MAX_WAITING // WAITING_SHARE):  # a flood from one address evicts only its own
                self._drop(min(mine, key=lambda s: self._waiting[s][0]))
            elif len(self._waiting) >= MAX_WAITING:
                oldest = min(self._waiting, key=lambda s: self._waiting[s][0])
                self._drop(oldest)
            self._waiting[request] = (time.monotonic(), client_address)
            self._selector.register(request, selectors.EVENT_READ)
        self._wake_w.send(b"x")

    def _watch(self) -> None:
        while not self._closed.is_set():
            events = self._selector.select(timeout=0.5)
            now = time.monotonic()
            with self._lock:
                for key, _ in events:
                    sock = key.fileobj
                    if sock is self._wake_r:
                        self._wake_r.recv(4096)
                        continue
                    _, address = self._waiting.pop(sock)  # type: ignore[call-overload]
                    self._selector.unregister(sock)
                    client = str(address[0]) if address else ""
                    if self._active.get(client, 0) >= self.per_client:
                        self._refuse_busy(sock)
                        continue
                    self._active[client] = self._active.get(client, 0) + 1
                    self._pool.submit(self._handle, sock, address)
                for sock, (since, _) in list(self._waiting.items()):
                    if now - since > self.idle_timeout_s:
                        self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        """Close a waiting connection (caller holds the lock)."""
        self._waiting.pop(sock, None)
        self._selector.unregister(sock)
        self.shutdown_request(sock)

    def active(self) -> dict[str, int]:
        """Connections on a worker now, per client address."""
        with self._lock:
            return dict(self._active)

    def _refuse_busy(self, sock: socket.socket) -> None:
        """Answer 429 without reading the request, and close (caller holds the lock; never blocks)."""
        sock.setblocking(False)
        try:
            sock.send(_BUSY)
            sock.recv(65536)  # what the client sent, so that closing does not reset the answer away
        except OSError:
            pass
        self.shutdown_request(sock)

    def request_deadline(self) -> float:
        """The moment by which a request handed to a worker now must have arrived (`DeadlineReader`)."""
        return time.monotonic() + self.request_timeout_s

    def _handle(self, sock: socket.socket, address: tuple) -> None:
        try:
            self.finish_request(sock, address)
        except Exception:  # noqa: BLE001 - as socketserver does: report, close, keep serving
            self.handle_error(sock, address)
        finally:
            self.shutdown_request(sock)
            client = str(address[0]) if address else ""
            with self._lock:
                left = self._active.get(client, 1) - 1
                if left > 0:
                    self._active[client] = left
                else:
                    self._active.pop(client, None)

    def server_close(self) -> None:
        """Stop the watcher, close waiting connections and the pool, then the listening socket (once: a second
        call does nothing)."""
        closed = getattr(self, "_closed", None)
        if closed is None:  # the listening socket failed in HTTPServer.__init__, before anything of ours existed
            super().server_close()
            return
        if closed.is_set():
            return
        closed.set()
        self._wake_w.send(b"x")
        self._watcher.join(timeout=5)
        with self._lock:
            for sock in list(self._waiting):
                self._drop(sock)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        super().server_close()
