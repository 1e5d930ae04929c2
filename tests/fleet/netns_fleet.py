"""A fleet of real SSH hosts on one machine, built from network namespaces (docs/pi-cluster.md §7).

Each host `gs-hN` is a network namespace joined to the bridge `gsbr0` (10.231.0.0/24, no default route, so
nothing leaves the machine), running `sshd -D` inside `unshare --mount --uts --pid`, with copy-on-write overlays
over the system folders so each host has its own /etc, /var, /usr ... and its own hostname. A user `gsadmin`
logs in by key and becomes root with sudo, as on a Raspberry Pi.

Only one fleet can exist on the machine at a time (fixed names); `Fleet.up()` takes a file lock so that two
test sessions wait for each other, and removes the leftovers of a crashed run before building.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

BRIDGE = "gsbr0"
SUBNET_PREFIX = "10.231.0"
BRIDGE_ADDR = f"{SUBNET_PREFIX}.1"
STATE_DIR = Path("/tmp/gesscale-fleet")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = Path("/tmp/gesscale-fleet.lock")
USER = "gsadmin"
# Overlaid per host; /run, /tmp get a fresh tmpfs instead.
OVERLAID = ("etc", "opt", "var", "usr", "srv", "root", "home", "boot")


def _normal_priority() -> None:  # pragma: no cover - runs in the child before exec
    """A host runs at normal priority (nice 0) even when the test runner is niced (tests/run_split.py), as a
    real host would: the delay daemons the tests measure run on it."""
    with contextlib.suppress(OSError):  # lowering the niceness needs root, which building a fleet needs anyway
        os.setpriority(os.PRIO_PROCESS, 0, 0)


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@dataclass(frozen=True)
class FleetHost:
    """One SSH host of the fleet: its name (= namespace and hostname) and its address on the bridge."""

    name: str
    address: str

    @property
    def veth(self) -> str:
        """The root-namespace side of the host's veth pair."""
        return f"{self.name}-v"


@dataclass
class Fleet:
    """Builds and tears down `count` namespace hosts with sshd; see the module docstring."""

    count: int = 3
    state_dir: Path = STATE_DIR
    hosts: list[FleetHost] = field(default_factory=list)
    _lock_fd: int | None = None

    @property
    def key_path(self) -> Path:
        """Private key that logs in as `gsadmin` on every host."""
        return self.state_dir / "id_ed25519"

    def up(self, timeout_s: float = 30.0) -> Fleet:
        """Build the fleet and wait until every sshd answers; on any failure, tear down what was built."""
        LOCK_FILE.touch(exist_ok=True)
        self._lock_fd = os.open(LOCK_FILE, os.O_RDWR)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._remove_leftovers()
            self.hosts = [FleetHost(f"gs-h{i}", f"{SUBNET_PREFIX}.{10 + i}") for i in range(1, self.count + 1)]
            self._prepare_state()
            _run("ip", "link", "add", BRIDGE, "type", "bridge")
            _run("ip", "addr", "add", f"{BRIDGE_ADDR}/24", "dev", BRIDGE)
            _run("ip", "link", "set", BRIDGE, "up")
            for host in self.hosts:
                self._start_host(host)
            self._wait_ssh(timeout_s)
        except BaseException:
            self.down()
            raise
        return self

    def down(self, release_lock: bool = True) -> None:
        """Kill every process of the fleet, delete veths, namespaces, bridge and state; release the lock.

        With `release_lock=False` the machine-wide lock is kept (call `release()` later), so a caller can check
        that nothing is left before another test session may build its own fleet.
        """
        if self._lock_fd is None:
            return  # not built or already torn down: the names may now belong to another session's fleet
        try:
            self._remove_leftovers()
        finally:
            if release_lock:
                self.release()

    def release(self) -> None:
        """Release the machine-wide fleet lock, if held."""
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def ssh(self, host: FleetHost, command: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a command on a host over real SSH as `gsadmin` (prefix with `sudo` for root)."""
        return subprocess.run(
            ["ssh", *self.ssh_options(), f"{USER}@{host.address}", command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    @property
    def known_hosts(self) -> Path:
        """The fleet's known_hosts file: its one host key for each host's address (inventory/local names it)."""
        return self.state_dir / "known_hosts"

    def ssh_options(self) -> list[str]:
        """OpenSSH client options for the fleet (host keys checked against the fleet's own known_hosts)."""
        return [
            "-i", str(self.key_path),
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=5",
        ]  # fmt: skip

    # -- building ---------------------------------------------------------------------------------------------

    def _prepare_state(self) -> None:
        self.state_dir.mkdir(mode=0o700, parents=True)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gesscale-fleet", "-f", str(self.key_path))
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.state_dir / "host_key"))
        public = " ".join((self.state_dir / "host_key.pub").read_text().split()[:2])
        self.known_hosts.write_text("".join(f"{h.address} {public}\n" for h in self.hosts))
        hosts = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts)
        (self.state_dir / "hosts").write_text(hosts)
        (self.state_dir / "sshd_config").write_text(
            "Port 22\n"
            "HostKey /run/gsfleet/host_key\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "UseDNS no\n"
            "PidFile /run/sshd.pid\n"
            "MaxStartups 50\n"
            "MaxSessions 50\n"
            "Subsystem sftp /usr/lib/openssh/sftp-server\n"
        )

    def _start_host(self, host: FleetHost) -> None:
        ns = host.name
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "link", "set", host.veth, "master", BRIDGE, "up")
        _run("ip", "-n", ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        root = self.state_dir / host.name
        for d in OVERLAID:
            (root / "upper" / d).mkdir(parents=True)
            (root / "work" / d).mkdir(parents=True)
        log = open(root / "sshd.log", "w")  # noqa: SIM115 - handed to the child process
        subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "--mount", "--uts", "--pid", "--fork", "--mount-proc",
             "sh", "-c", self._host_script(host, root)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_normal_priority,
        )  # fmt: skip
        log.close()

    def _host_script(self, host: FleetHost, root: Path) -> str:
        mounts = "".join(
            f"mount -t overlay overlay -o lowerdir=/{d},upperdir={root}/upper/{d},workdir={root}/work/{d} /{d}\n"
            for d in OVERLAID
        )
        s = self.state_dir
        # The project (and its venv, which the hosts run the delay daemon from) stays visible at its own path
        # when it lives under /tmp, which each host gets fresh: a clone there is what a CI run may use.
        project = PROJECT_ROOT
        keep_before = keep_after = ""
        if project == Path("/tmp") or Path("/tmp") in project.parents:
            q = shlex.quote(str(project))
            keep_before = f"mkdir -p /run/gsfleet/project\nmount --bind {q} /run/gsfleet/project\n"
            keep_after = f"mkdir -p {q}\nmount --bind /run/gsfleet/project {q}\n"
        return (
            "set -e\n"
            "mount --make-rprivate /\n"
            f"{mounts}"
            "mount -t tmpfs -o mode=755 tmpfs /run\n"
            "mkdir -p /run/gsfleet /run/sshd /run/lock\n"
            f"cp {s}/host_key {s}/sshd_config {s}/hosts {s}/id_ed25519.pub /run/gsfleet/\n"
            f"{keep_before}"
            "mount -t tmpfs -o mode=1777 tmpfs /tmp\n"
            f"{keep_after}"
            f"hostname {host.name}\n"
            f"echo {host.name} > /etc/hostname\n"
            "cp /run/gsfleet/hosts /etc/hosts\n"
            f"useradd -m -s /bin/bash -p '*' {USER}\n"  # "*": no password, not locked
            f"echo '{USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{USER}\n"
            f"chmod 440 /etc/sudoers.d/{USER}\n"
            f"install -d -m 700 -o {USER} -g {USER} /home/{USER}/.ssh\n"
            f"install -m 600 -o {USER} -g {USER} /run/gsfleet/id_ed25519.pub /home/{USER}/.ssh/authorized_keys\n"
            "exec /usr/sbin/sshd -D -e -f /run/gsfleet/sshd_config\n"
        )

    def _wait_ssh(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = list(self.hosts)
        while pending:
            host = pending[0]
            try:
                with socket.create_connection((host.address, 22), timeout=1) as sock:
                    sock.settimeout(2)
                    if sock.recv(4).startswith(b"SSH-"):
                        pending.pop(0)
                        continue
            except OSError:
                pass
            if time.monotonic() > deadline:
                log = (self.state_dir / host.name / "sshd.log").read_text()
                raise RuntimeError(f"fleet host {host.name} did not start sshd: {log.strip()[-500:]}")
            time.sleep(0.05)

    # -- teardown ---------------------------------------------------------------------------------------------

    def _remove_leftovers(self) -> None:
        names = [n.split()[0] for n in _run("ip", "netns", "list").stdout.splitlines() if n.strip()]
        for ns in [n for n in names if n.startswith("gs-h")]:
            self._kill_namespace(ns)
            _run("ip", "link", "del", f"{ns}-v", check=False)
            _run("ip", "netns", "del", ns, check=False)
        _run("ip", "link", "del", BRIDGE, check=False)
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir)

    @staticmethod
    def _kill_namespace(ns: str) -> None:
        for _ in range(50):
            pids = [int(p) for p in _run("ip", "netns", "pids", ns, check=False).stdout.split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        raise RuntimeError(f"processes of namespace {ns} survive SIGKILL")
