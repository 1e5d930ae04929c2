"""Debian's mosquitto as the local MQTT broker: write its config, start it, stop it.

mosquitto started as root drops to the `mosquitto` user, so the data directory (persistence file) is handed
to that user. The queue limits are lifted so that a slow subscriber with a persistent session (the bridge)
never has QoS 1 messages dropped by the broker.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from gesscale.errors import UserError
from gesscale.process import ManagedProcess, check_port, spawn, wait_until_listening

HOST = "127.0.0.1"
MOSQUITTO_USER = "mosquitto"


def mosquitto_binary() -> str:
    """Path of the mosquitto binary (PATH, then /usr/sbin where Debian installs it)."""
    path = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin")
    if not path:
        raise UserError("mosquitto not found: install it (apt-get install mosquitto)")
    return path


@dataclass(frozen=True)
class MosquittoSecurity:
    """A hardened listener: TLS with this server certificate and key, and, with `password_file` (made by
    `mosquitto_passwd`), no anonymous clients. The files are copied into the data directory for mosquitto's user."""

    certfile: Path | None = None
    keyfile: Path | None = None
    password_file: Path | None = None


def mosquitto_config(port: int, data_dir: Path, autosave_interval_s: int = 5,
                     security: MosquittoSecurity | None = None) -> str:  # fmt: skip
    """The mosquitto.conf text for a listener on 127.0.0.1:port with persistence under `data_dir`, saved every
    `autosave_interval_s` seconds (mosquitto's own default is 1800 s); TLS and passwords as `security` says (the
    files already copied into `data_dir` by `start_mosquitto`)."""
    hardened = []
    if security is not None and security.certfile is not None:
        hardened += [f"certfile {data_dir}/server.crt", f"keyfile {data_dir}/server.key"]
    if security is not None and security.password_file is not None:
        hardened += [f"password_file {data_dir}/passwd"]
    anonymous = "false" if security is not None and security.password_file is not None else "true"
    return "\n".join(
        [
            f"listener {port} {HOST}",
            *hardened,
            f"allow_anonymous {anonymous}",
            "persistence true",
            f"persistence_location {data_dir}/",
            f"autosave_interval {autosave_interval_s}",
            "max_queued_messages 0",
            "max_queued_bytes 0",
            "max_inflight_messages 1000",
            "set_tcp_nodelay true",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "",
        ]
    )


def _hand_to_mosquitto_user(data_dir: Path) -> None:
    """When running as root, mosquitto drops to its own user: give it the data directory."""
    if os.geteuid() != 0:
        return
    try:
        entry = pwd.getpwnam(MOSQUITTO_USER)
    except KeyError:
        return
    for parent in data_dir.parents:
        st = parent.stat()
        if not (
            st.st_mode & stat.S_IXOTH
            or (st.st_uid == entry.pw_uid and st.st_mode & stat.S_IXUSR)
            or (st.st_gid == entry.pw_gid and st.st_mode & stat.S_IXGRP)
        ):
            raise UserError(
                f"mosquitto runs as user '{MOSQUITTO_USER}' and cannot enter {parent}: "
                "choose a data directory it can reach (e.g. under /tmp or /var/lib)"
            )
    os.chown(data_dir, entry.pw_uid, entry.pw_gid)
    for child in data_dir.iterdir():
        if child.suffix == ".db" or child.name in _SECURITY_FILES:
            os.chown(child, entry.pw_uid, entry.pw_gid)


_SECURITY_FILES = ("server.crt", "server.key", "passwd")


def _copy_security_files(data_dir: Path, security: MosquittoSecurity) -> None:
    """Copy the TLS and password files where mosquitto's user may read them (0600, handed over later)."""
    pairs = [(security.certfile, "server.crt"), (security.keyfile, "server.key"), (security.password_file, "passwd")]
    if (security.certfile is None) != (security.keyfile is None):
        raise UserError("mosquitto TLS needs both a certificate and a key file")
    for source, name in pairs:
        if source is None:
            continue
        target = data_dir / name
        try:
            shutil.copyfile(source, target)
        except OSError as err:
            raise UserError(f"cannot copy {source} for mosquitto: {err.strerror or err}") from None
        target.chmod(0o600)


@dataclass
class MqttBroker:
    """A running mosquitto; connect to `host`:`port`. Context manager; `stop()` is idempotent."""

    port: int
    data_dir: Path
    process: ManagedProcess
    host: str = HOST
    autosave_interval_s: int = 5
    security: MosquittoSecurity | None = None

    def alive(self) -> bool:
        """True while mosquitto runs."""
        return self.process.alive()

    def stop(self) -> None:
        """Stop mosquitto (SIGTERM; it saves its persistence file)."""
        self.process.stop()

    @property
    def db_path(self) -> Path:
        """mosquitto's persistence file (written at each autosave, on SIGUSR1 and at exit)."""
        return self.data_dir / "mosquitto.db"

    def saved_at(self) -> int | None:
        """Modification time (ns) of the persistence file, None before the first save."""
        try:
            return self.db_path.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def save(self, timeout_s: float = 10.0) -> None:
        """Make mosquitto write its in-memory state (sessions, subscriptions, queues) to disk now, and wait until
        it has: SIGUSR1 (mosquitto(8)). A subscription made before this survives a `kill -9` right after."""
        before = self.saved_at()
        os.kill(self.process.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while self.saved_at() == before:
            if time.monotonic() > deadline or not self.alive():
                raise UserError(f"mosquitto did not save its state within {timeout_s:g} s (log: "
                                f"{self.process.log_path})")  # fmt: skip
            time.sleep(0.02)

    def __enter__(self) -> MqttBroker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None):
        self.stop()


def start_mosquitto(port: int, data_dir: Path, *, timeout_s: float = 15.0, autosave_interval_s: int = 5,
                    security: MosquittoSecurity | None = None) -> MqttBroker:  # fmt: skip
    """Start mosquitto on 127.0.0.1:port with its config and data under `data_dir`; wait until it answers."""
    binary = mosquitto_binary()
    check_port(port, "MQTT", HOST)
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    conf = data_dir / "mosquitto.conf"
    if security is not None:
        _copy_security_files(data_dir, security)
    conf.write_text(mosquitto_config(port, data_dir, autosave_interval_s, security))
    _hand_to_mosquitto_user(data_dir)
    proc = spawn([binary, "-c", str(conf)], data_dir / "mosquitto.log", cwd=data_dir)
    wait_until_listening(proc, port, "mosquitto", timeout_s)
    return MqttBroker(port=port, data_dir=data_dir, process=proc, autosave_interval_s=autosave_interval_s,
                      security=security)
