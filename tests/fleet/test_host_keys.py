"""SSH host keys learned once and checked: the pure merge, and over real sshd hosts (the fleet) the fabric
path and Ansible refusing an unknown or a changed key, `gesscale provision --learn-host-keys` learning them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from netem.hosts import load_inventory
from netem.known_hosts import host_pattern, merge, parse
from netem.playbooks import run_playbook
from netem.remote import FabricRemote

ROOT = Path(__file__).resolve().parents[2]
KEY_A = "AAAAC3NzaC1lZDI1NTE5AAAAIKeyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
KEY_B = "AAAAC3NzaC1lZDI1NTE5AAAAIKeyBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"


def test_merge_appends_new_hosts_keeps_known_ones_and_reports_changed_ones():
    existing = f"# comment\n10.0.0.1 ssh-ed25519 {KEY_A}\n[10.0.0.2]:2222 ssh-ed25519 {KEY_A}\n"
    scanned = {
        "10.0.0.1": f"10.0.0.1 ssh-ed25519 {KEY_A}\n",                 # same key: unchanged
        "[10.0.0.2]:2222": f"[10.0.0.2]:2222 ssh-ed25519 {KEY_B}\n",   # another key: changed
        "10.0.0.3": f"# 10.0.0.3:22 SSH-2.0-OpenSSH\n10.0.0.3 ssh-ed25519 {KEY_B}\n",  # new
    }  # fmt: skip
    result = merge(existing, scanned)
    assert result.unchanged == ["10.0.0.1"]
    assert result.changed == ["[10.0.0.2]:2222"]
    assert result.new_lines == [f"10.0.0.3 ssh-ed25519 {KEY_B}"]
    assert parse("a,b ssh-rsa K\n@revoked c ssh-rsa K\n") == {"a": {("ssh-rsa", "K")}, "b": {("ssh-rsa", "K")}}
    assert host_pattern("h", 22) == "h" and host_pattern("h", 2222) == "[h]:2222"


def _inventory(tmp_path: Path, known_hosts: Path) -> Path:
    """inventory/local with its known_hosts file moved to `known_hosts`."""
    text = (ROOT / "inventory" / "local" / "hosts.yml").read_text()
    text = text.replace("ssh_known_hosts_file: /tmp/gesscale-fleet/known_hosts", f"ssh_known_hosts_file: {known_hosts}")
    assert str(known_hosts) in text
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text(text)
    return inv


def _run_true(inv: Path) -> None:
    host = load_inventory(inv)["gs-h1"]
    remote = FabricRemote(connect_timeout_s=10)
    try:
        res = remote.run(host, "true")
        assert res.ok, res.stderr
    finally:
        remote.close()


PING = "- hosts: gs-h1\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n"


@pytest.mark.e2e
def test_unknown_and_changed_host_keys_are_refused_and_learned_once(fleet, tmp_path, capsys):
    known = tmp_path / "known_hosts"
    inv = _inventory(tmp_path, known)
    ping = tmp_path / "ping.yml"
    ping.write_text(PING)

    with pytest.raises(UserError, match="unknown SSH host key"):  # nothing recorded yet
        _run_true(inv)
    unknown = run_playbook(str(ping), inv)
    assert not unknown.ok and unknown.recap["gs-h1"].unreachable == 1

    assert main(["provision", "-i", str(inv), "--learn-host-keys"]) in (0, None)
    out = capsys.readouterr().out
    assert "3 key(s) learned" in out and "SHA256:" in out
    assert known.stat().st_mode & 0o077 == 0
    real = fleet.known_hosts.read_text().split()[2]
    assert {line.split()[2] for line in known.read_text().splitlines()} == {real}  # the fleet's own key
    _run_true(inv)  # (Ansible with known keys: test_roles; no successful run here, whose SSH master
    # connection would outlive the key change below)

    # the host's key changes (another machine answers on its address): every path refuses
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().split()[1]
    known.write_text(known.read_text().replace(real, other))
    with pytest.raises(UserError, match="CHANGED"):
        _run_true(inv)
    changed = run_playbook(str(ping), inv)
    assert not changed.ok and changed.recap["gs-h1"].unreachable == 1
    assert main(["provision", "-i", str(inv), "--learn-host-keys"]) == 2  # never overwritten
    assert "host key changed" in capsys.readouterr().err
    assert real not in known.read_text()
