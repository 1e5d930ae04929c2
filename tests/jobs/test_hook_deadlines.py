"""The hook server against slow and hostile clients (issue 28): one deadline per request, a cap per client
address, and numbers in a body that are finite and in range. Real HTTP over loopback sockets against
`jobs.http_api.serve`; each client binds its own 127.0.0.x address, as separate machines would have.

The trickling clients are bounded: at most 8, each sending one byte every 0.4 s and giving up when the server
closes (or at the end of its request, which a per-read timeout would let it reach).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gesscale.batch_record import BatchRecord
from gesscale.errors import UserError
from jobs.hook import ScalingHook
from jobs.http_api import MAX_TARGET, DriverApi, serve
from jobs.job import JobConfig
from jobs.metrics import prometheus_text
from tests.jobs.test_driver_api import OBS, InMemoryCluster

TOKEN = "t0ken-for-tests"
WORKERS = 4
TIMEOUT_S = 1.5
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"p" * 20 + b"\r\n\r\n"
BYTE_EVERY_S = 0.4  # a read timeout of TIMEOUT_S never fires; the whole request would take ~27 s


def _start(timeout_s: float):  # type: ignore[no-untyped-def]
    cluster = InMemoryCluster(["127.0.0.21", "127.0.0.22"])
    cluster.set_target(1)
    metrics = prometheus_text(lambda: BatchRecord.from_dict(OBS))
    api = DriverApi(lambda: OBS, metrics, ScalingHook(cluster, sleep=lambda s: None), TOKEN)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    return serve(api, "127.0.0.1", free, workers=WORKERS, timeout_s=timeout_s)


@pytest.fixture
def server() -> Iterator:
    srv = _start(TIMEOUT_S)
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def patient_server() -> Iterator:
    """A 30 s deadline: two held requests stay held while the test makes its third, however loaded the machine."""
    srv = _start(30.0)
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _port(srv) -> int:
    return srv.server_address[1]


def _connect(srv, source: str, timeout_s: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(srv)), timeout=timeout_s, source_address=(source, 0))


def _answer(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _trickle(srv, source: str, sent: list[int]) -> None:
    """Send REQUEST one byte at a time until the server closes; record how many bytes went out."""
    with _connect(srv, source) as sock:
        count = 0
        try:
            for i in range(len(REQUEST)):
                sock.sendall(REQUEST[i : i + 1])
                count += 1
                time.sleep(BYTE_EVERY_S)
                sock.setblocking(False)
                try:
                    if sock.recv(1) == b"":
                        break  # the server closed the connection
                except BlockingIOError:
                    pass
                finally:
                    sock.setblocking(True)
        except OSError:
            pass  # closed by the server while sending (a reset)
        sent.append(count)


def test_trickling_clients_are_cut_at_the_deadline_and_metrics_are_served(server) -> None:
    sent: list[int] = []
    threads = [threading.Thread(target=_trickle, args=(server, f"127.0.0.{31 + i}", sent)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        with _connect(server, "127.0.0.50", timeout_s=12.0) as sock:  # would wait ~27 s behind the tricklers
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _answer(sock)
    finally:
        for t in threads:
            t.join(timeout=30)
    assert answer.startswith(b"HTTP/1.0 200"), answer[:200]
    assert len(sent) == 8 and all(n < len(REQUEST) for n in sent), sent  # every trickler was cut off mid-request
    print(f"8 tricklers cut after {sorted(sent)} of {len(REQUEST)} bytes; GET /metrics answered meanwhile")


def test_one_address_holds_at_most_half_the_workers(patient_server) -> None:
    server = patient_server
    held = [_connect(server, "127.0.0.60") for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(b"G")  # a request begun and never finished: each holds a worker until its deadline
        for _ in range(1000):  # until the watcher has handed both to workers
            if server.active().get("127.0.0.60") == 2:
                break
            time.sleep(0.01)
        assert server.active().get("127.0.0.60") == 2
        with _connect(server, "127.0.0.60") as third:
            third.sendall(REQUEST)
            assert _answer(third).startswith(b"HTTP/1.0 429"), "a third request from the address was served"
        with _connect(server, "127.0.0.61") as other:
            other.sendall(REQUEST)
            assert _answer(other).startswith(b"HTTP/1.0 200")
    finally:
        for sock in held:
            sock.close()


def test_a_flood_of_idle_connections_from_one_address_evicts_only_its_own(server, monkeypatch) -> None:
    monkeypatch.setattr("jobs.http_server.MAX_WAITING", 16)  # 4 waiting connections per address at most
    early = _connect(server, "127.0.0.71")  # another client's connection, opened before the flood
    flood = [_connect(server, "127.0.0.70") for _ in range(40)]
    try:
        with _connect(server, "127.0.0.70") as last:  # the flooding address still gets its newest one served
            last.sendall(REQUEST)
            assert _answer(last).startswith(b"HTTP/1.0 200")
        early.sendall(REQUEST)
        assert _answer(early).startswith(b"HTTP/1.0 200"), "the other client's waiting connection was closed"
    finally:
        early.close()
        for sock in flood:
            sock.close()


def _post(srv, body: bytes) -> tuple[int, dict]:
    head = (f"POST /executors/target HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
    with _connect(srv, "127.0.0.1") as sock:
        sock.sendall(head + body)
        data = _answer(sock)
    assert data, "the connection was closed with no answer"
    return int(data.split(b" ", 2)[1]), json.loads(data.split(b"\r\n\r\n", 1)[1])


@pytest.mark.parametrize("body", [
    b'{"target": Infinity}', b'{"target": -Infinity}', b'{"target": NaN}', b'{"target": 1e308}',
    b'{"target": 1e400}', b'{"target": 1, "wait_s": NaN}', b'{"target": 1, "wait_s": 1e308}',
    b'{"target": -1}', b'{"target": 1.5}', b'{"target": true}', b'{"target": "3"}',
    b'{"target": ' + str(MAX_TARGET + 1).encode() + b"}", b'{"target": ' + b"9" * 5000 + b"}",
    b'{"target": 1, "wait_s": -1}', b"[1]", b"\xff\xfe",
])  # fmt: skip
def test_non_finite_or_out_of_range_numbers_are_answered_400(server, body: bytes) -> None:
    status, answer = _post(server, body)
    assert status == 400 and answer["error"].startswith("bad request"), answer


def test_in_range_numbers_still_pass(server) -> None:
    assert _post(server, b'{"target": 2, "wait_s": 0}')[0] == 200
    assert _post(server, b'{"target": 1.0, "wait_s": 0.5}')[0] == 200


def test_ports_are_checked_where_they_are_given() -> None:
    api = DriverApi(lambda: None, lambda: b"", None, None)
    for port in (0, -1, 65536, 10**6):
        with pytest.raises(ValueError, match="1-65535"):
            serve(api, "127.0.0.1", port)
    for flag, field in (("--http-port", "http_port"), ("--ui-port", "ui_port")):
        cfg = JobConfig(bootstrap="127.0.0.1:9092", input="in", output="out", checkpoint=Path("ck"),
                        **{field: 70000})  # type: ignore[arg-type]
        with pytest.raises(UserError, match=f"{flag} must be a port in 1-65535"):
            cfg.validate()
