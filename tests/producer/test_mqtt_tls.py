"""The producer and the bridge against Debian's mosquitto with TLS (a throwaway CA, tests/fixtures/tls.py) and a
password file (mosquitto_passwd), credentials from the environment and a file only: every record confirmed in
Kafka, 0 lost; a wrong password or an untrusted certificate is one error line and exit 2; the password appears
in no summary, log line or command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gesscale.brokers.mqtt import MosquittoSecurity, MqttBroker, start_mosquitto
from gesscale.brokers.security import MqttSecurity
from gesscale.cli import main
from gesscale.process import free_port
from producer.bridge import Bridge
from tests.faults.support import key_counts, synthetic_keys, tally
from tests.fixtures.kafka import MQTT_PORTS, scratch_dir
from tests.fixtures.tls import TlsFiles

USER, PASSWORD = "rides-writer", "s3cret-Pa55word"


@pytest.fixture
def tls_mosquitto(tls_certs: TlsFiles, tmp_path: Path) -> Iterator[MqttBroker]:
    """mosquitto with a TLS listener (the test CA's server certificate) and one user in a password file."""
    if shutil.which("mosquitto_passwd") is None:
        pytest.skip("mosquitto_passwd not installed")
    passwd = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwd), USER, PASSWORD], check=True, capture_output=True)
    scratch = scratch_dir("gesscale-mqtt-tls-")
    security = MosquittoSecurity(tls_certs.cert, tls_certs.key, passwd)
    broker = start_mosquitto(free_port(*MQTT_PORTS), scratch / "data", security=security)
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ca: Path, password: str) -> None:
    secret = tmp_path / "mqtt-password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    monkeypatch.setenv("GESSCALE_MQTT_CA_FILE", str(ca))
    monkeypatch.setenv("GESSCALE_MQTT_USERNAME", USER)
    monkeypatch.setenv("GESSCALE_MQTT_PASSWORD_FILE", str(secret))
    monkeypatch.delenv("GESSCALE_MQTT_PASSWORD", raising=False)


@pytest.mark.e2e
def test_producer_and_bridge_over_tls_with_a_password_lose_nothing(
    tls_mosquitto: MqttBroker, tls_certs: TlsFiles, kafka_bootstrap: str, kafka_topic_factory, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _env(monkeypatch, tmp_path, tls_certs.ca, PASSWORD)
    topic = kafka_topic_factory(partitions=2, prefix="tls")
    mqtt_topic = f"rides/{uuid.uuid4().hex[:8]}"
    notes: list[str] = []
    bridge = Bridge(tls_mosquitto.host, tls_mosquitto.port, [mqtt_topic], kafka_bootstrap, topic, notes.append,
                    client_id=f"tls-bridge-{uuid.uuid4().hex[:8]}", mqtt_configure=MqttSecurity.from_env().configure)
    stop, result = threading.Event(), {}
    thread = threading.Thread(target=lambda: result.update(stats=bridge.run(stop)))
    thread.start()
    try:
        assert bridge._connected.wait(15), notes
        out = tmp_path / "produce.json"
        args = ["produce", "--mqtt", f"{tls_mosquitto.host}:{tls_mosquitto.port}", "--mqtt-topic", mqtt_topic,
                "--rate", "1000", "--duration", "3", "--duplication", "1", "-b", kafka_bootstrap, "-t", topic,
                "--outbox", str(tmp_path / "outbox.sqlite"), "--json", str(out), "-q"]  # fmt: skip
        assert main(args) == 0
    finally:
        stop.set()
        thread.join(60)
    summary = json.loads(out.read_text())
    v = summary["verification"]
    lost, duplicated = tally(key_counts(kafka_bootstrap, topic), synthetic_keys(3000, 1))
    print(f"TLS + password: {summary['acked']} acknowledged, {v['found']} of {v['expected']} confirmed in Kafka, "
          f"lost {lost}, duplicated {duplicated}; bridge forwarded {result['stats'].forwarded}")  # fmt: skip
    assert v["verified"] and v["found"] == 3000 and lost == 0
    assert "TLS as rides-writer" in summary["destination"]
    written = out.read_text() + "".join(capfd.readouterr()) + "".join(notes)
    assert PASSWORD not in written and PASSWORD not in " ".join(args)


@pytest.mark.e2e
@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate"])
@pytest.mark.parametrize("command", ["produce", "bridge"])
def test_wrong_password_or_untrusted_certificate_is_one_line_exit_2(
    tls_mosquitto: MqttBroker, tls_certs: TlsFiles, kafka_bootstrap: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: str, command: str,
) -> None:  # fmt: skip
    ca = tls_certs.rogue_ca if case == "untrusted certificate" else tls_certs.ca
    _env(monkeypatch, tmp_path, ca, "not-the-password" if case == "wrong password" else PASSWORD)
    address = f"{tls_mosquitto.host}:{tls_mosquitto.port}"
    if command == "produce":
        args = ["produce", "--mqtt", address, "--rate", "10", "--duration", "1", "-b", kafka_bootstrap,
                "--outbox", str(tmp_path / "outbox.sqlite"), "-q"]  # fmt: skip
    else:
        args = ["bridge", "--mqtt", address, "-b", kafka_bootstrap, "-t", f"tls-{uuid.uuid4().hex[:6]}",
                "--client-id", f"tls-{uuid.uuid4().hex[:6]}", "--idle-exit", "2"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gesscale: error: "), err
    expected = "certificate verify failed" if case == "untrusted certificate" else "refused the connection"
    assert expected in err[0].lower(), err
    assert "not-the-password" not in err[0] and PASSWORD not in err[0]
