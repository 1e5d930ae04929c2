"""The SSH test fleet itself: real sshd hosts, separate files per host, and a teardown that leaves nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fleet.netns_fleet import BRIDGE, Fleet


def _leftovers() -> list[str]:
    found = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
             if n.startswith("gs-h")]  # fmt: skip
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        found.append(BRIDGE)
    return found


@pytest.mark.e2e
def test_hosts_answer_over_ssh_with_sudo_and_own_files(fleet):
    for host in fleet.hosts:
        res = fleet.ssh(host, "hostname; cat /etc/hostname; sudo -n id -u; ip -4 -o addr show eth0")
        assert res.returncode == 0, res.stderr
        name, etc_name, uid, addr = res.stdout.splitlines()
        assert name == etc_name == host.name
        assert uid == "0"
        assert f"{host.address}/24" in addr
    # A file written on one host exists there only (copy-on-write overlays), and not on this machine.
    first, second = fleet.hosts[0], fleet.hosts[1]
    assert fleet.ssh(first, "echo mine | sudo tee /etc/gesscale-fleet-probe").returncode == 0
    assert fleet.ssh(second, "test -e /etc/gesscale-fleet-probe").returncode == 1
    assert not Path("/etc/gesscale-fleet-probe").exists()
    # Hosts reach each other by name through /etc/hosts.
    assert fleet.ssh(first, f"ping -c 1 -W 2 {second.name}").returncode == 0


@pytest.mark.e2e
def test_teardown_removes_every_trace(fleet):
    # Checks run while this session still holds the machine-wide fleet lock, so that another test session
    # (which would build the same names) cannot interleave.
    assert {h.name for h in fleet.hosts} <= set(_leftovers())
    fleet.down(release_lock=False)
    try:
        assert _leftovers() == []
        assert not fleet.state_dir.exists()
        assert subprocess.run(["pgrep", "-f", "sshd -D -e -f /run/gsfleet"], capture_output=True).returncode == 1
    finally:
        fleet.release()
    again = Fleet(count=2)
    try:
        again.up()
        assert again.ssh(again.hosts[1], "true").returncode == 0
    finally:
        again.down(release_lock=False)
    try:
        assert _leftovers() == []
    finally:
        again.release()
