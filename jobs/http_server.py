"""An HTTP server with a fixed number of worker threads, for the driver's API (jobs/http_api.py).

`ThreadingHTTPServer` starts a thread per connection and keeps it while the connection idles: 300 idle
connections held 300 threads (issue 17). Here one watcher thread waits, with a selector, until a connection has
sent something, and only then hands it to a pool of `workers` threads; a connection that sends nothing within
`idle_timeout_s` is closed without ever holding a worker. Inside a worker the socket has a timeout, so a client
that stops half-way through its request frees the worker after `timeout_s`.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer

MAX_WAITING = 1024  # connections waiting for their first byte; beyond that the oldest is closed


class PooledHTTPServer(HTTPServer):
    """HTTPServer whose requests run on a bounded pool, idle connections on no thread at all."""

    request_queue_size = 128  # listen backlog: a burst of connections is accepted, not left to SYN retries

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, workers: int = 8,
                 idle_timeout_s: float = 10.0) -> None:  # fmt: skip
        super().__init__(address, handler)
        self.idle_timeout_s = idle_timeout_s
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
            if len(self._waiting) >= MAX_WAITING:
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
                    self._pool.submit(self._handle, sock, address)
                for sock, (since, _) in list(self._waiting.items()):
                    if now - since > self.idle_timeout_s:
                        self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        """Close a waiting connection (caller holds the lock)."""
        self._waiting.pop(sock, None)
        self._selector.unregister(sock)
        self.shutdown_request(sock)

    def _handle(self, sock: socket.socket, address: tuple) -> None:
        try:
            self.finish_request(sock, address)
        except Exception:  # noqa: BLE001 - as socketserver does: report, close, keep serving
            self.handle_error(sock, address)
        finally:
            self.shutdown_request(sock)

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
