"""MQTT over TLS for real: certificates made by playbooks/certs.yml (the documented step), the mqtt role's
listener template with `mqtt_tls: true`, a real mosquitto on this machine; a client with the CA and a password
gets in, without TLS, with the wrong CA or the wrong password it does not."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import jinja2
import paho.mqtt.client as mqtt
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PASSWORD = "tls-test-0123456789"
INVENTORY = """mqtt:
  hosts:
    mq: {ansible_host: 127.0.0.1}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _certs(folder: Path) -> Path:
    inv = folder / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text(INVENTORY)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", ANSIBLE_NOCOLOR="1")
    res = subprocess.run([BIN / "ansible-playbook", "-i", inv, ROOT / "playbooks" / "certs.yml"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    return inv / "tls"


def _config(tls: Path, folder: Path, port: int) -> Path:
    """The role's template rendered with TLS on, its /etc paths moved into the test's folder."""
    template = (ROOT / "playbooks" / "roles" / "mqtt" / "templates" / "gesscale.conf.j2").read_text()
    text = jinja2.Template(template, keep_trailing_newline=True).render(
        ansible_managed="test", mqtt_tls=True, mqtt_tls_keep_plain=False, mqtt_port=_free_port(),
        mqtt_tls_port=port, mqtt_bind_address="127.0.0.1", mqtt_tls_dir=str(tls), mqtt_persistence=False)
    for name, dest in (("mq.crt", "server.crt"), ("mq.key", "server.key")):
        shutil.copy(tls / name, tls / dest)
    text = text.replace("/etc/mosquitto/gesscale.passwd", str(folder / "passwd"))
    text = text.replace("/etc/mosquitto/gesscale.acl", str(folder / "acl"))
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(folder / "passwd"), "producer", PASSWORD], check=True,
                   capture_output=True, timeout=30)
    (folder / "acl").write_text("user producer\ntopic readwrite taxi/#\n")
    conf = folder / "mosquitto.conf"
    conf.write_text(text + ("user root\n" if os.geteuid() == 0 else ""))  # keep access to the test's files
    return conf


def _connect(port: int, *, ca: Path | None, password: str) -> str:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    client.username_pw_set("producer", password)
    if ca is not None:
        client.tls_set(ca_certs=str(ca), cert_reqs=ssl.CERT_REQUIRED)
    done, result = threading.Event(), []

    def on_connect(_c, _u, _f, reason, _p):
        result.append("accepted" if not reason.is_failure else f"refused: {reason}")
        done.set()

    def on_disconnect(_c, _u, _f, reason, _p):
        result.append(f"closed: {reason}")
        done.set()

    client.on_connect = on_connect
    client.on_disconnect = on_disconnect
    try:
        client.connect("127.0.0.1", port, keepalive=10)
    except (ssl.SSLError, OSError) as err:
        return f"failed: {type(err).__name__}"
    client.loop_start()
    try:
        if not done.wait(10):
            return "no answer"
    finally:
        client.loop_stop()
        client.disconnect()
    return result[0]


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("mosquitto") is None, reason="mosquitto not installed")
def test_mosquitto_tls_listener_accepts_only_tls_clients_with_the_ca(tmp_path):
    tls = _certs(tmp_path)
    port = _free_port()
    conf = _config(tls, tmp_path, port)
    broker = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert broker.poll() is None, broker.stdout.read()
            time.sleep(0.1)
        assert _connect(port, ca=tls / "ca.crt", password=PASSWORD) == "accepted"
        assert _connect(port, ca=tls / "ca.crt", password="wrong-password").startswith("refused")
        assert _connect(port, ca=None, password=PASSWORD).startswith("closed")  # plain MQTT on the TLS port
        other = tmp_path / "other"
        other.mkdir()
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(other / "k"), "-out", str(other / "ca.crt"), "-subj", "/CN=other", "-days", "1"],
                       check=True, capture_output=True, timeout=30)
        assert _connect(port, ca=other / "ca.crt", password=PASSWORD).startswith("failed")  # not our CA
    finally:
        broker.terminate()
        broker.wait(timeout=10)
