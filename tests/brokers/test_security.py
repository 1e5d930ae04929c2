"""Client security settings from the environment (gesscale.brokers.security): what they accept and refuse, that
the password never shows, and the SASL handshake of the job's lean producer and of kafka-python's own SCRAM
mechanism against a small scripted SCRAM server (no Kafka distribution with SASL can be installed here)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import socket
import struct
import threading
from pathlib import Path

import pytest

from gesscale.brokers.security import KafkaSecurity, MqttSecurity
from gesscale.errors import UserError

USER, PASSWORD = "job", "pa55-w0rd"


def test_plaintext_by_default_adds_nothing() -> None:
    assert KafkaSecurity.from_env({}).client_config() == {}
    assert MqttSecurity.from_env({}) == MqttSecurity()


def test_sasl_ssl_from_the_environment_and_a_password_file(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text(PASSWORD + "\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    sec = KafkaSecurity.from_env({"GESSCALE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl", "GESSCALE_KAFKA_USERNAME": USER,
                                  "GESSCALE_KAFKA_PASSWORD_FILE": str(secret), "GESSCALE_KAFKA_CA_FILE": str(ca)})
    assert sec.client_config() == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD, "ssl_check_hostname": True, "ssl_cafile": str(ca), "ssl_certfile": None,
        "ssl_keyfile": None,
    }  # fmt: skip
    assert PASSWORD not in repr(sec) and PASSWORD not in sec.describe()
    assert sec.describe() == "SASL_SSL, SCRAM-SHA-512 as job"


@pytest.mark.parametrize(("env", "message"), [
    ({"GESSCALE_KAFKA_SECURITY_PROTOCOL": "TLS"}, "must be one of PLAINTEXT"),
    ({"GESSCALE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "needs GESSCALE_KAFKA_USERNAME"),
    ({"GESSCALE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "GESSCALE_KAFKA_USERNAME": "u",
      "GESSCALE_KAFKA_PASSWORD_FILE": "/nonexistent/pw"}, "GESSCALE_KAFKA_PASSWORD_FILE: password file not found"),
    ({"GESSCALE_KAFKA_SASL_MECHANISM": "GSSAPI"}, "SASL_MECHANISM must be one of"),
    ({"GESSCALE_KAFKA_CA_FILE": "/nonexistent/ca.pem"}, "GESSCALE_KAFKA_CA_FILE: file not found"),
])  # fmt: skip
def test_kafka_settings_refused_with_one_clear_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message) as err:
        KafkaSecurity.from_env(env)
    assert "\n" not in str(err.value)


def test_mqtt_settings(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    sec = MqttSecurity.from_env({"GESSCALE_MQTT_CA_FILE": str(ca), "GESSCALE_MQTT_USERNAME": "p",
                                 "GESSCALE_MQTT_PASSWORD": PASSWORD})
    assert sec.tls and sec.username == "p" and PASSWORD not in repr(sec) and sec.describe() == "TLS as p"
    with pytest.raises(UserError, match="USERNAME is not"):
        MqttSecurity.from_env({"GESSCALE_MQTT_PASSWORD": PASSWORD})
    with pytest.raises(UserError, match="GESSCALE_MQTT_TLS must be"):
        MqttSecurity.from_env({"GESSCALE_MQTT_TLS": "maybe"})


# --- a scripted SCRAM server (RFC 5802 / 7677), just enough of the Kafka protocol for SASL and one Produce ----------

class ScramServer:
    """Answers SaslHandshake v1, SaslAuthenticate v0 (SCRAM-SHA-512 for one user) and then Produce v3 with
    success, one connection at a time, on a thread; records what it saw."""

    def __init__(self, user: str, password: str, iterations: int = 4096) -> None:
        self.user, self.password, self.iterations = user, password, iterations
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError, struct.error):
                self._session(conn)

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def _session(self, conn: socket.socket) -> None:
        authenticated, state = False, {}
        while True:
            size = struct.unpack(">i", self._read(conn, 4))[0]
            req = self._read(conn, size)
            api, version, correlation, cid_len = struct.unpack_from(">hhih", req, 0)
            body = req[10 + cid_len:]
            if api == 17:  # SaslHandshake
                mech = body[2:2 + struct.unpack_from(">h", body, 0)[0]].decode()
                self.seen.append(f"handshake v{version} {mech}")
                ok = mech == "SCRAM-SHA-512"
                resp = struct.pack(">hi", 0 if ok else 33, 1) + struct.pack(">h", 13) + b"SCRAM-SHA-512"
            elif api == 36:  # SaslAuthenticate
                token = body[4:4 + struct.unpack_from(">i", body, 0)[0]]
                answer, error = self._scram(token, state)
                self.seen.append("authenticate " + ("ok" if error == 0 else "failed"))
                authenticated = authenticated or (error == 0 and "done" in state)
                msg = b"" if error == 0 else b"Authentication failed: invalid credentials"
                resp = (struct.pack(">hh", error, len(msg) if error else -1) + msg
                        + struct.pack(">i", len(answer)) + answer)
            elif api == 0:  # Produce v3: one topic, one partition, success (only after authentication)
                self.seen.append(f"produce authenticated={authenticated}")
                pos = 2 + 2 + 4  # transactional id (null), acks, timeout
                pos += 4  # topic count
                name_len = struct.unpack_from(">h", body, pos)[0]
                name = body[pos:pos + 2 + name_len]
                pos += 2 + name_len + 4
                partition = struct.unpack_from(">i", body, pos)[0]
                error = 0 if authenticated else 58
                resp = (struct.pack(">i", 1) + name + struct.pack(">iihqq", 1, partition, error, 0, -1)
                        + struct.pack(">i", 0))
            else:
                return
            out = struct.pack(">i", correlation) + resp
            conn.sendall(struct.pack(">i", len(out)) + out)

    def _scram(self, token: bytes, state: dict) -> tuple[bytes, int]:
        h = hashlib.sha512
        if "first" not in state:
            bare = token.split(b",", 2)[2]
            attrs = dict(p.split(b"=", 1) for p in bare.split(b","))
            if attrs[b"n"].decode() != self.user:
                return b"", 58
            salt = os.urandom(16)
            nonce = attrs[b"r"] + base64.b64encode(os.urandom(12))
            first = b"r=" + nonce + b",s=" + base64.b64encode(salt) + b",i=" + str(self.iterations).encode()
            state.update(first=first, bare=bare, salt=salt, nonce=nonce)
            return first, 0
        attrs = dict(p.split(b"=", 1) for p in token.split(b","))
        without_proof = token.rsplit(b",p=", 1)[0]
        auth = state["bare"] + b"," + state["first"] + b"," + without_proof
        salted = hashlib.pbkdf2_hmac("sha512", self.password.encode(), state["salt"], self.iterations)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        stored = h(client_key).digest()
        signature = hmac.new(stored, auth, h).digest()
        proof = base64.b64decode(attrs[b"p"])
        recovered = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if attrs[b"r"] != state["nonce"] or h(recovered).digest() != stored:
            return b"", 58
        server_key = hmac.new(salted, b"Server Key", h).digest()
        state["done"] = True
        return b"v=" + base64.b64encode(hmac.new(server_key, auth, h).digest()), 0

    def close(self) -> None:
        self.sock.close()


def _sasl(password: str) -> KafkaSecurity:
    return KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", USER, password)


@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
def test_job_lean_producer_authenticates_with_scram_before_producing(password: str) -> None:
    from jobs.produce import ProduceError, _Connection, encode_batch, encode_record

    server = ScramServer(USER, PASSWORD)
    try:
        batch = encode_batch([encode_record(0, b"k", b"v")], 0)
        if password == PASSWORD:
            conn = _Connection("127.0.0.1", server.port, 5.0, _sasl(password))
            conn.produce("rides", 0, batch, 1000)
            conn.close()
            assert server.seen == ["handshake v1 SCRAM-SHA-512", "authenticate ok", "authenticate ok",
                                   "produce authenticated=True"]
        else:
            with pytest.raises(ProduceError, match="SASL authentication failed: Authentication failed"):
                _Connection("127.0.0.1", server.port, 5.0, _sasl(password))
            assert "produce authenticated=True" not in server.seen
    finally:
        server.close()


@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
def test_kafka_python_scram_mechanism_with_our_settings_against_the_scripted_server(password: str) -> None:
    """kafka-python's own SCRAM mechanism, built from `client_config()` as its clients build it, exchanges its
    messages with the scripted server's SCRAM logic (the Kafka framing around them is kafka-python's, not run)."""
    from kafka.net.sasl import get_sasl_mechanism

    server = ScramServer(USER, PASSWORD)
    server.close()
    config = _sasl(password).client_config()
    mechanism = get_sasl_mechanism(config["sasl_mechanism"])(**config)
    state: dict = {}
    error = 0
    while not mechanism.is_done() and error == 0:
        answer, error = server._scram(mechanism.auth_bytes(), state)
        if error == 0:
            mechanism.receive(answer)  # checks the server's signature on the last round
    assert (mechanism.is_done() and error == 0) == (password == PASSWORD)
