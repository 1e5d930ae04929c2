"""The toolkit's Kafka clients over TLS, live: the embedded broker has no TLS, so a TLS-terminating proxy
(tests/fixtures/tls.py) sits in front of it, and every connection to the broker's advertised address is
redirected to the proxy (iptables, loopback; the proxy's own upstream connections carry a mark and pass). With
`GESSCALE_KAFKA_SECURITY_PROTOCOL=SSL` and the test CA, `gesscale produce` (topic creation, sending, the end
verification's read-back), the job's helpers and its lean producer work through it; a plaintext request and a
client trusting another CA get no Kafka answer. SASL is covered by tests/brokers/test_security.py (scripted server)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gesscale.brokers import KafkaBroker, start_kafka
from gesscale.cli import main
from gesscale.process import free_port
from tests.fixtures.kafka import KAFKA_PORTS, scratch_dir
from tests.fixtures.tls import PROXY_MARK, TlsFiles, tls_proxy


def _iptables() -> str | None:
    import os

    path = shutil.which("iptables")
    if path is None or os.geteuid() != 0:
        return None
    return path if subprocess.run([path, "-w", "-t", "nat", "-L", "OUTPUT", "-n"],
                                  capture_output=True).returncode == 0 else None  # fmt: skip


@contextmanager
def _redirect(port: int, to_port: int) -> Iterator[None]:
    """Connections to 127.0.0.1:`port` go to `to_port` instead, unless marked by the proxy."""
    iptables = _iptables()
    assert iptables is not None
    rule = ["OUTPUT", "-o", "lo", "-p", "tcp", "-d", "127.0.0.1", "--dport", str(port), "-m", "mark", "!", "--mark",
            str(PROXY_MARK), "-j", "REDIRECT", "--to-ports", str(to_port)]  # fmt: skip
    subprocess.run([iptables, "-w", "-t", "nat", "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run([iptables, "-w", "-t", "nat", "-D", *rule], check=False)


@pytest.fixture
def tls_kafka(tls_certs: TlsFiles) -> Iterator[tuple[KafkaBroker, object]]:
    """The embedded broker whose advertised address only speaks TLS (through the proxy)."""
    scratch = scratch_dir("gesscale-kafka-tls-")
    broker = start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka")
    try:
        proxy_port = free_port(19300, 19399)
        with tls_proxy(proxy_port, broker.port, tls_certs) as proxy, _redirect(broker.port, proxy_port):
            yield broker, proxy
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.e2e
@pytest.mark.skipif(_iptables() is None, reason="needs root and iptables (nat) for the proxy on the broker's port")
def test_kafka_clients_over_tls_through_a_terminating_proxy(
    tls_kafka, tls_certs: TlsFiles, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, proxy = tls_kafka
    monkeypatch.setenv("GESSCALE_KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("GESSCALE_KAFKA_CA_FILE", str(tls_certs.ca))
    out = tmp_path / "produce.json"
    assert main(["produce", "-b", broker.bootstrap, "-t", "rides", "--partitions", "2", "--rate", "500", "--duration",
                 "2", "--duplication", "1", "--json", str(out), "-q"]) == 0  # fmt: skip
    v = json.loads(out.read_text())["verification"]
    assert v["verified"] and v["found"] == 1000

    from jobs.kafka_io import partition_counts, read_keys
    from jobs.produce import BatchProducer

    assert partition_counts(broker.bootstrap, ["rides"]) == {"rides": 2}
    sink = BatchProducer(broker.bootstrap, timeout_s=10)
    try:
        for i in range(100):
            sink.send("rides", 0, f"job-{i}".encode(), b'{"key": "job"}')
        sink.flush()
    finally:
        sink.close()
    assert {f"job-{i}".encode() for i in range(100)} <= read_keys(broker.bootstrap, "rides", 0, 0)
    handshakes = proxy.handshakes
    assert handshakes > 0
    print(f"Kafka over TLS: produce verified {v['found']} of {v['expected']}, the job's sink wrote 100 and read them "
          f"back; {handshakes} TLS connections through the proxy")  # fmt: skip

    # the broker's address speaks TLS only: a plaintext Kafka request gets no Kafka answer, and a client that
    # trusts another CA fails the handshake
    api_versions = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as raw:
        raw.sendall(struct.pack(">i", len(api_versions)) + api_versions)
        answer = raw.recv(5)
    assert answer == b"" or answer[0] == 0x15, answer  # closed, or a TLS alert record
    rogue = ssl.create_default_context(cafile=str(tls_certs.rogue_ca))
    raw = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            rogue.wrap_socket(raw, server_hostname="127.0.0.1")
    finally:
        raw.close()
