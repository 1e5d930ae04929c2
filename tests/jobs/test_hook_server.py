"""The scaling hook's server cannot be held by a client (issue 17): the token is checked and the body's size
refused before the body is read, idle connections hold no thread, silent sockets time out, and only
`Authorization: Bearer <token>` is accepted. Real HTTP over a socket against `jobs.http_api.serve`."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gesscale.batch_record import BatchRecord
from jobs.hook import ScalingHook
from jobs.http_api import MAX_BODY, DriverApi, serve
from jobs.metrics import prometheus_text
from tests.jobs.test_driver_api import OBS, InMemoryCluster

TOKEN = "t0ken-for-tests"
WORKERS = 4


@pytest.fixture
def port() -> Iterator[int]:
    cluster = InMemoryCluster(["127.0.0.21", "127.0.0.22"])
    cluster.set_target(1)
    metrics = prometheus_text(lambda: BatchRecord.from_dict(OBS))
    api = DriverApi(lambda: OBS, metrics, ScalingHook(cluster, sleep=lambda s: None), TOKEN)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    server = serve(api, "127.0.0.1", free, workers=WORKERS, timeout_s=1.5)
    try:
        yield free
    finally:
        server.shutdown()
        server.server_close()


def raw(port: int, head: str, body: bytes = b"", timeout_s: float = 5.0) -> tuple[int, dict]:
    """Send `head` (request line and headers, without the blank line) and `body`; the status and JSON answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(head.encode() + b"\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1] or b"{}")


def post(path: str, body: bytes, auth: str | None = f"Bearer {TOKEN}", length: int | None = -1) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: x"]
    if auth is not None:
        lines.append(f"Authorization: {auth}")
    if length is not None:
        lines.append(f"Content-Length: {len(body) if length == -1 else length}")
    return "\r\n".join(lines)


def test_token_only_as_bearer(port: int) -> None:
    body = b'{"target": 1}'
    assert raw(port, post("/executors/target", body), body)[0] == 200
    assert raw(port, post("/executors/target", body, auth=TOKEN), body)[0] == 401  # accepted before the fix
    assert raw(port, post("/executors/target", body, auth=f"bearer {TOKEN}"), body)[0] == 401
    assert raw(port, post("/executors/target", body, auth="Bearer "), body)[0] == 401
    assert raw(port, post("/executors/target", body, auth=None), body)[0] == 401


def test_missing_or_too_large_content_length_is_refused_before_reading(port: int) -> None:
    """A 150 MiB Content-Length is answered 413 at once although not one byte of the body was sent: the server
    did not try to read it (it would wait for it until the socket timeout)."""
    start = time.monotonic()
    status, answer = raw(port, post("/executors/add", b"", length=150 * 1024 * 1024))
    assert status == 413 and str(MAX_BODY) in answer["error"]
    assert time.monotonic() - start < 1.0
    assert raw(port, post("/executors/add", b"", length=None))[0] == 411
    assert raw(port, post("/executors/add", b"", auth=None, length=150 * 1024 * 1024))[0] == 401  # token first
    just = b'{"wait_s": 0}'.ljust(MAX_BODY)  # at the limit: read and served
    assert raw(port, post("/executors/add", just), just)[0] == 200


def test_idle_connections_hold_no_thread_and_requests_still_pass(port: int) -> None:
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
    try:
        time.sleep(0.5)
        during = threading.active_count() - before
        start = time.monotonic()
        status, _ = raw(port, f"GET /executors HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}")
        took = time.monotonic() - start
    finally:
        for sock in idle:
            sock.close()
    assert status == 200 and took < 1.0
    assert during <= WORKERS, f"300 idle connections added {during} threads"
    print(f"300 idle connections: {during} threads added (pool of {WORKERS}); a request meanwhile took {took:.3f} s")


def test_a_silent_or_stalled_client_is_cut_off(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
        start = time.monotonic()
        assert silent.recv(1) == b""  # closed by the server without a request
        assert 1.0 < time.monotonic() - start < 5.0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as stalled:
        stalled.sendall(post("/executors/target", b"{}", length=2).encode() + b"\r\n\r\n")  # body never sent
        start = time.monotonic()
        assert stalled.recv(1) in (b"", b"H")  # closed, or an error answer, after the socket timeout
        assert 1.0 < time.monotonic() - start < 5.0
