"""How the toolkit's clients reach a hardened Kafka (TLS, SASL) and mosquitto (TLS, username and password).

Settings come from the environment only, secrets from the environment or from files it names, never from the
command line (where `ps` and the experiment bundle's recorded command would show them); nothing here is ever
written into a summary, report or bundle (the password fields are left out of `repr`). Every Kafka client of
the toolkit (producer, bridge, the job's driver and tasks, the admin helpers) takes `kafka_client_config()`;
the producer's and the bridge's MQTT clients take `mqtt_security().configure`.

| variable | meaning |
| --- | --- |
| `GESSCALE_KAFKA_SECURITY_PROTOCOL` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT` or `SASL_SSL` |
| `GESSCALE_KAFKA_SASL_MECHANISM` | `SCRAM-SHA-512` (default), `SCRAM-SHA-256` or `PLAIN` |
| `GESSCALE_KAFKA_USERNAME`, `GESSCALE_KAFKA_PASSWORD` or `GESSCALE_KAFKA_PASSWORD_FILE` | SASL credentials |
| `GESSCALE_KAFKA_CA_FILE`, `GESSCALE_KAFKA_CERT_FILE`, `GESSCALE_KAFKA_KEY_FILE` | TLS: CA, client cert |
| `GESSCALE_MQTT_TLS` | `1`: TLS (implied by `GESSCALE_MQTT_CA_FILE`); the system's CAs without a CA file |
| `GESSCALE_MQTT_USERNAME`, `GESSCALE_MQTT_PASSWORD` or `GESSCALE_MQTT_PASSWORD_FILE` | MQTT credentials |
| `GESSCALE_MQTT_CA_FILE`, `GESSCALE_MQTT_CERT_FILE`, `GESSCALE_MQTT_KEY_FILE` | TLS: CA, client cert |
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gesscale.errors import UserError, brief, cut
from gesscale.inputfile import check_regular, read_text

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
ENV_PREFIX = "GESSCALE_"


# The longest secret read from a `*_PASSWORD_FILE` (a password, not a key store).
MAX_SECRET_BYTES = 64 * 2**10


def _file(env: Mapping[str, str], name: str) -> str | None:
    """A path variable: None when unset; a UserError naming the variable when it names no readable regular file
    (a FIFO or a device would block the TLS library's open)."""
    value = env.get(name) or None
    if value is None:
        return None
    try:
        check_regular(value, "file")
    except UserError as err:
        raise UserError(f"{name}: {err}") from None
    if not os.access(value, os.R_OK):
        raise UserError(f"{name}: cannot read {cut(value)}")
    return value


def _credential(value: str | None, name: str) -> str | None:
    """A user name or password as a client sends it: text without control characters that encodes as UTF-8 (an
    undecodable byte of the environment arrives as a lone surrogate). The value itself is never quoted."""
    if value is None:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UserError(f"{name} holds a control character (a line break, a tab, NUL...): give the bare value")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{name} is not valid UTF-8 text") from None
    return value


def _secret(env: Mapping[str, str], name: str) -> str | None:
    """`NAME` from the environment, else the content of the file `NAME_FILE` (one trailing line break dropped)."""
    if env.get(name):
        return _credential(env[name], name)
    path = env.get(f"{name}_FILE")
    if not path:
        return None
    try:
        text = read_text(path, "password file", MAX_SECRET_BYTES)
    except UserError as err:
        raise UserError(f"{name}_FILE: {err}") from None
    text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    if not text:
        raise UserError(f"{name}_FILE: {cut(path)} is empty")
    return _credential(text, f"{name}_FILE")


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    """An enumerated variable, in any letter case (ASCII only: 'ſsl' is not 'SSL')."""
    raw = env.get(name) or default
    value = raw.upper() if raw.isascii() else raw
    if value not in allowed:
        raise UserError(f"{name} must be one of {', '.join(allowed)}, got {brief(raw, 40)}")
    return value


@dataclass(frozen=True)
class KafkaSecurity:
    """Kafka client security: protocol, SASL mechanism and credentials, TLS files."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSecurity:
        """The settings of the `GESSCALE_KAFKA_*` variables (module docstring); UserError when inconsistent."""
        env = os.environ if env is None else env
        p = f"{ENV_PREFIX}KAFKA_"
        protocol = _choice(env, f"{p}SECURITY_PROTOCOL", "PLAINTEXT", PROTOCOLS)
        mechanism = _choice(env, f"{p}SASL_MECHANISM", "SCRAM-SHA-512", MECHANISMS)
        username = _credential(env.get(f"{p}USERNAME") or None, f"{p}USERNAME")
        sec = cls(protocol, mechanism, username, _secret(env, f"{p}PASSWORD"),
                  _file(env, f"{p}CA_FILE"), _file(env, f"{p}CERT_FILE"), _file(env, f"{p}KEY_FILE"))  # fmt: skip
        if sec.sasl and not (sec.username and sec.password):
            raise UserError(f"{p}SECURITY_PROTOCOL={protocol} needs {p}USERNAME and {p}PASSWORD (or {p}PASSWORD_FILE)")
        return sec

    @property
    def sasl(self) -> bool:
        """True when the client authenticates with SASL."""
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        """True when the connection is encrypted."""
        return self.protocol in ("SSL", "SASL_SSL")

    def client_config(self) -> dict[str, Any]:
        """kafka-python keyword arguments (KafkaProducer, KafkaConsumer, KafkaAdminClient); empty for PLAINTEXT."""
        if self.protocol == "PLAINTEXT":
            return {}
        config: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            config.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                          sasl_plain_password=self.password)  # fmt: skip
        if self.tls:
            config.update(ssl_check_hostname=True, ssl_cafile=self.cafile, ssl_certfile=self.certfile,
                          ssl_keyfile=self.keyfile)  # fmt: skip
        return config

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying TLS context for clients that open their own sockets (the job's lean producer); None
        without TLS."""
        if not self.tls:
            return None
        return _context(self.cafile, self.certfile, self.keyfile)

    def describe(self) -> str:
        """One line for logs and summaries: never the password."""
        if self.protocol == "PLAINTEXT":
            return "PLAINTEXT"
        who = f", {self.mechanism} as {self.username}" if self.sasl else ""
        return f"{self.protocol}{who}"


def _context(cafile: str | None, certfile: str | None, keyfile: str | None) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=cafile)
        if certfile:
            context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as err:
        raise UserError(f"cannot load the TLS files ({cafile}, {certfile}): {err}") from None
    return context


@dataclass(frozen=True)
class MqttSecurity:
    """MQTT client security: TLS (with the CA to trust and an optional client certificate) and credentials."""

    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MqttSecurity:
        """The settings of the `GESSCALE_MQTT_*` variables (module docstring)."""
        env = os.environ if env is None else env
        p = f"{ENV_PREFIX}MQTT_"
        flag = (env.get(f"{p}TLS") or "").lower()
        if flag not in ("", "0", "1", "true", "false", "yes", "no"):
            raise UserError(f"{p}TLS must be 1 or 0, got {brief(flag, 40)}")
        cafile = _file(env, f"{p}CA_FILE")
        password = _secret(env, f"{p}PASSWORD")
        username = _credential(env.get(f"{p}USERNAME") or None, f"{p}USERNAME")
        if password and not username:
            raise UserError(f"{p}PASSWORD is set but {p}USERNAME is not")
        return cls(flag in ("1", "true", "yes") or cafile is not None, username, password, cafile,
                   _file(env, f"{p}CERT_FILE"), _file(env, f"{p}KEY_FILE"))  # fmt: skip

    def configure(self, client: Any) -> None:
        """Apply TLS and credentials to a paho-mqtt client (before it connects)."""
        if self.tls:
            client.tls_set_context(_context(self.cafile, self.certfile, self.keyfile))
        if self.username:
            client.username_pw_set(self.username, self.password)

    def describe(self) -> str:
        """One line for logs and summaries: never the password."""
        parts = ["TLS" if self.tls else "plain TCP"]
        if self.username:
            parts.append(f"as {self.username}")
        return " ".join(parts)


def kafka_client_config() -> dict[str, Any]:
    """kafka-python security arguments from the environment (KafkaSecurity.from_env().client_config())."""
    return KafkaSecurity.from_env().client_config()


def mqtt_security() -> MqttSecurity:
    """MQTT security settings from the environment."""
    return MqttSecurity.from_env()
