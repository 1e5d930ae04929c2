"""Bad input is reported as one clear error before any host is contacted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from netem.hosts import host_from_vars, hosts_for_map, load_inventory

ROOT = Path(__file__).resolve().parents[2]
# Addresses in TEST-NET-1 (RFC 5737): nothing answers there, so a test that reached SSH would hang or fail.
INVENTORY = """
all:
  vars: {ansible_user: pi, ansible_become: true}
  hosts:
    a: {ansible_host: 192.0.2.1}
    b: {ansible_host: 192.0.2.2}
    c: {ansible_host: 192.0.2.3}
    noaddr: {ansible_user: pi, ansible_host: null}
    named: {ansible_host: pi07.local}
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    return path


def _map(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "map.yaml"
    path.write_text(text)
    return path


def test_inventory_is_read_with_ansible_semantics(inventory):
    hosts = load_inventory(inventory)
    assert hosts["a"].address == "192.0.2.1" and hosts["a"].user == "pi" and hosts["a"].needs_sudo
    assert hosts["noaddr"].address is None


@pytest.mark.parametrize(
    ("map_text", "message"),
    [
        ("nodes: {a: {}, b: {}, ghost: {}}\ndefault_rtt_ms: 5\n", "ghost not in"),
        ("nodes: {a: {}, noaddr: {}}\ndefault_rtt_ms: 5\n", "host noaddr has no address"),
        ("nodes: {a: {}, named: {}}\ndefault_rtt_ms: 5\n", "not an IPv4 address"),
        ("nodes: {a: {}, b: {}, c: {}}\nrtt_ms: {a: {b: 10, c: 20}}\n", r"missing RTT for pair \(b, c\)"),
    ],
)
def test_cli_rejects_bad_input_before_touching_hosts(tmp_path, inventory, capsys, map_text, message):
    map_path = _map(tmp_path, map_text)
    for verb in ("plan", "apply", "clear", "measure"):
        code = main(["netem", verb, "--inventory", str(inventory), "--map", str(map_path)])
        err = capsys.readouterr().err
        assert code == 2, verb
        assert err.startswith("gesscale: error:") and len(err.strip().splitlines()) == 1
        assert re.search(message, err), err


def test_hosts_for_map_keeps_map_order_and_checks_every_host():
    lmap = latency_map_from_dict({"nodes": ["b", "a"], "default_rtt_ms": 3})
    hosts = {n: host_from_vars(n, {"ansible_host": f"10.0.0.{i}"}) for i, n in enumerate("ab", 1)}
    assert list(hosts_for_map(hosts, lmap)) == ["b", "a"]
    with pytest.raises(UserError, match="b, a not in"):
        hosts_for_map({}, lmap)


def test_missing_inventory_and_bad_choices(tmp_path, capsys):
    map_path = str(ROOT / "inventory" / "latency" / "local.yaml")
    assert main(["netem", "plan", "-i", str(tmp_path / "none"), "-m", map_path]) == 2
    assert "inventory not found" in capsys.readouterr().err
    assert main(["netem", "apply", "-i", str(ROOT / "inventory" / "local"), "-m", map_path, "--via", "x"]) == 2
    assert "--via must be one of" in capsys.readouterr().err


def test_provision_user_errors_are_one_line(tmp_path, capsys):
    local = str(ROOT / "inventory" / "local")
    cases = [
        (["provision", "-i", str(tmp_path / "none")], "inventory not found"),
        (["provision", "-i", local, "-p", "nope"], "playbook not found: nope"),
        (["provision", "-i", local, "-e", "novalue"], "must look like KEY=VALUE"),
        (["provision", "-i", local, "--vault-password-file", str(tmp_path / "pw")], "vault password file not found"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_an_inventory_host_missing_from_the_map_is_an_error():
    lmap = latency_map_from_dict({"nodes": ["a", "b"], "default_rtt_ms": 3})
    hosts = {n: host_from_vars(n, {"ansible_host": f"10.0.0.{i}"}) for i, n in enumerate("abc", 1)}
    with pytest.raises(UserError, match=r"^inventory: host\(s\) c not in the latency map <inline>"):
        hosts_for_map(hosts, lmap)
    assert list(hosts_for_map({n: hosts[n] for n in "ab"}, lmap)) == ["a", "b"]
