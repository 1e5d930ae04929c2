"""Running commands on inventory hosts over SSH (fabric), one host per thread.

The rest of `netem` only sees the small `Remote` interface, so the orchestration can be read without SSH
details. Commands that need root run through `sudo -n` when the login user is not root and `ansible_become`
is set, as Ansible would. Host keys are checked, never learned silently: a host's key must be in its
known_hosts file (`Host.known_hosts`, learned once with `gesscale provision --learn-host-keys`) or the user's
~/.ssh/known_hosts; an unknown or changed key stops the connection (fabric's own default accepts any key).
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from gesscale.errors import UserError
from netem.hosts import Host

T = TypeVar("T")
# tc and ip live in /usr/sbin, which is not on a non-root user's PATH on Debian and Raspberry Pi OS.
SBIN_PATH = 'PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"; export PATH; '


@dataclass(frozen=True)
class Result:
    """Outcome of one remote command."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_code == 0


class Remote(Protocol):
    """What netem needs from a transport: run a shell command on a host, optionally as root, with stdin."""

    def run(self, host: Host, command: str, *, root: bool = False, stdin: str | None = None) -> Result:
        """Run `command` through the host's shell and return its status and output."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class FabricRemote:
    """`Remote` over fabric/paramiko; one cached connection per host, safe to use from one thread per host."""

    def __init__(self, connect_timeout_s: float = 10.0, command_timeout_s: float = 120.0) -> None:
        self._connect_timeout_s = connect_timeout_s
        self._command_timeout_s = command_timeout_s
        self._connections: dict[str, object] = {}
        self._lock = threading.Lock()

    def _connection(self, host: Host):  # -> fabric.Connection
        with self._lock:
            conn = self._connections.get(host.name)
            if conn is None:
                from fabric import Connection  # imported lazily: paramiko is slow to import

                kwargs: dict[str, object] = {"timeout": self._connect_timeout_s}
                if host.key_file:
                    kwargs["key_filename"] = host.key_file
                from paramiko import RejectPolicy

                conn = Connection(host.ssh_host, user=host.user, port=host.port, connect_kwargs=kwargs)
                conn.client.set_missing_host_key_policy(RejectPolicy())  # fabric would auto-accept
                conn.client.load_system_host_keys()  # ~/.ssh/known_hosts, when there is one
                if host.known_hosts and os.path.isfile(host.known_hosts):
                    conn.client.load_host_keys(host.known_hosts)
                self._connections[host.name] = conn
            return conn

    def run(self, host: Host, command: str, *, root: bool = False, stdin: str | None = None) -> Result:
        """Run a command; connection failures become a `UserError` that names the host."""
        command = SBIN_PATH + command
        if root and host.needs_sudo:
            command = "sudo -n sh -c " + shlex.quote(command)
        conn = self._connection(host)
        try:
            res = conn.run(  # type: ignore[attr-defined]
                command,
                hide=True,
                warn=True,
                in_stream=io.StringIO(stdin) if stdin is not None else False,
                timeout=self._command_timeout_s,
            )
        except Exception as err:  # paramiko/socket errors: unreachable host, bad key, refused, timeout
            raise UserError(host_key_problem(host, err) or
                            f"host {host.name} ({host.ssh_host}): SSH failed: {type(err).__name__}: {err}") from None
        return Result(res.exited, res.stdout, res.stderr)

    def close(self) -> None:
        """Close every cached connection."""
        with self._lock:
            for conn in self._connections.values():
                conn.close()  # type: ignore[attr-defined]
            self._connections.clear()


def host_key_problem(host: Host, err: Exception) -> str | None:
    """One line for a refused host key (changed, or not recorded), else None."""
    from paramiko.ssh_exception import BadHostKeyException, SSHException

    where = host.known_hosts or "~/.ssh/known_hosts"
    if isinstance(err, BadHostKeyException):
        return (f"host {host.name} ({host.ssh_host}): its SSH host key CHANGED since it was recorded in {where}: "
                "refusing to connect (someone may be in the middle; if the machine was reinstalled, check its "
                "fingerprint on its console and remove its old line)")
    if isinstance(err, SSHException) and "not found in known_hosts" in str(err):
        return (f"host {host.name} ({host.ssh_host}): unknown SSH host key (not in {where}): learn it once with "
                "`gesscale provision -i INVENTORY --learn-host-keys` and compare the fingerprints it prints")
    return None


class LocalRemote:
    """`Remote` for hosts that are this machine: the command runs in `sh -c` here (as root: sudo -n if needed)."""

    def __init__(self, command_timeout_s: float = 120.0) -> None:
        self._command_timeout_s = command_timeout_s

    def run(self, host: Host, command: str, *, root: bool = False, stdin: str | None = None) -> Result:
        """Run a command locally; a timeout is a `UserError` naming the host."""
        argv = ["sh", "-c", SBIN_PATH + command]
        if root and os.geteuid() != 0:
            argv = ["sudo", "-n", *argv]
        try:
            res = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=self._command_timeout_s)
        except subprocess.TimeoutExpired:
            raise UserError(f"host {host.name} (local): command timed out") from None
        return Result(res.returncode, res.stdout, res.stderr)

    def close(self) -> None:
        """Nothing to release."""


class HostRemote:
    """`Remote` that runs each host's commands where the host is: locally for local hosts, else over SSH."""

    def __init__(self) -> None:
        self._local = LocalRemote()
        self._ssh: FabricRemote | None = None

    def run(self, host: Host, command: str, *, root: bool = False, stdin: str | None = None) -> Result:
        """Dispatch by `host.local`."""
        if host.local:
            return self._local.run(host, command, root=root, stdin=stdin)
        if self._ssh is None:
            self._ssh = FabricRemote()
        return self._ssh.run(host, command, root=root, stdin=stdin)

    def close(self) -> None:
        """Close SSH connections, if any were made."""
        if self._ssh is not None:
            self._ssh.close()


def on_each(hosts: Iterable[Host], work: Callable[[Host], T], parallel: bool = True) -> dict[str, T]:
    """Run `work(host)` for every host, in parallel threads by default; results keyed by host name.

    The first exception (in host order) is re-raised after all threads finished, so no host is left midway
    without the caller knowing.
    """
    chosen = list(hosts)
    if not parallel or len(chosen) <= 1:
        return {h.name: work(h) for h in chosen}
    with ThreadPoolExecutor(max_workers=min(16, len(chosen))) as pool:
        futures = {h.name: pool.submit(work, h) for h in chosen}
    return {name: fut.result() for name, fut in futures.items()}
