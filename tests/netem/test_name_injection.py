"""Names and templated values that would run as code: a map node name in the root tc script, an IPv6 scope id
in a rendered config line, a Jinja lookup evaluated by a command that says it touches no host.

Each case is the attack as a user's file would carry it; the file is refused with one line (naming the field
and what it expects) before anything is written or run, and the payload's `touch` never happens.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from netem.hosts import load_inventory
from netem.inventory_fields import check_ssh_host
from netem.plan import NodePlan, PeerRule, build_plan

ROOT = Path(__file__).resolve().parents[2]
BASE = {"a": {"ansible_host": "10.9.0.1", "netem_device": "eth0"},
        "b": {"ansible_host": "10.9.0.2", "netem_device": "eth0"}}  # fmt: skip


def _gesscale(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gesscale", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)  # fmt: skip


def _inventory(tmp: Path, hosts: dict) -> Path:
    path = tmp / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return path


# -- a newline in a map node name ------------------------------------------------------------------------------


def test_a_newline_in_a_map_node_name_is_refused_where_the_map_is_read(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    evil = f"b\ntouch {sentinel}"
    with pytest.raises(UserError) as err:
        latency_map_from_dict({"nodes": {"a": {}, evil: {}}, "default_rtt_ms": 10}, "map.yaml")
    line = str(err.value)
    assert "\n" not in line and "map.yaml: nodes" in line and "\\n" in line, line
    for name in ("../b", "-rf", "b c", "b;reboot", "", "x" * 64, "b\x00"):
        with pytest.raises(UserError, match="not a valid node name"):
            latency_map_from_dict({"nodes": [name, "a"], "default_rtt_ms": 10})


def test_netem_plan_prints_no_script_for_a_map_with_an_injected_name(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    evil = f"b\ntouch {sentinel}"
    lmap = tmp_path / "map.yaml"
    lmap.write_text(yaml.safe_dump({"nodes": {"a": {}, evil: {}}, "rtt_ms": {"a": {evil: 10}}}))
    inv = _inventory(tmp_path, {"a": BASE["a"], evil: BASE["b"]})
    res = _gesscale("netem", "plan", "-i", str(inv), "-m", str(lmap), "--script")
    assert res.returncode == 2 and "touch" not in res.stdout, res.stdout
    assert res.stderr.count("\n") == 1 and "not a valid" in res.stderr, res.stderr
    assert not sentinel.exists()


def test_the_script_refuses_a_name_that_bypassed_the_readers() -> None:
    rule = PeerRule("b\nreboot", "10.9.0.2", 5.0, "1:10")
    with pytest.raises(UserError, match="not a valid node name"):
        NodePlan("a", "eth0", "netem", (rule,)).apply_script()
    with pytest.raises(UserError, match="not a valid node name"):
        NodePlan("a\nreboot", "eth0", "netem", ()).apply_script()
    with pytest.raises(UserError, match="unknown netem mode"):
        NodePlan("a", "eth0", "netem\nreboot", ()).apply_script()
    with pytest.raises(UserError, match="not an IPv4 address"):
        NodePlan("a", "eth0", "netem", (PeerRule("b", "10.9.0.2\nreboot", 5.0, "1:10"),)).apply_script()
    lmap = latency_map_from_dict({"nodes": ["a", "b"], "default_rtt_ms": 10})
    script = build_plan(lmap, {"a": "10.9.0.1", "b": "10.9.0.2"}, {"a": "eth0", "b": "eth0"})["a"].apply_script()
    assert script.splitlines()[2] == "# b 10.9.0.2 rtt/2=5ms class 1:10"  # valid names are unchanged


def test_an_inventory_host_or_group_name_outside_the_rule_is_refused(tmp_path: Path) -> None:
    hosts = {"a": BASE["a"], "b$(reboot)": BASE["b"]}
    with pytest.raises(UserError, match=r"host name") as err:
        load_inventory(_inventory(tmp_path, hosts))
    assert "\n" not in str(err.value)
    path = tmp_path / "groups.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"k3s;reboot": {"hosts": BASE}}}}))
    with pytest.raises(UserError, match=r"group name"):
        load_inventory(path)


# -- an IPv6 scope id ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["x\ndisable-network-policy: true", "eth0 ", "eth0;reboot", "../x", "", "a" * 16])
def test_an_ipv6_scope_id_must_be_an_interface_name(scope: str) -> None:
    with pytest.raises(UserError, match="ansible_host") as err:
        check_ssh_host("a", f"fe80::1%{scope}")
    assert "\n" not in str(err.value)


def test_valid_ipv6_literals_still_pass() -> None:
    for value in ("fe80::1%eth0", "fe80::1%3", "2001:db8::7", "fe80::1%enp1s0.100"):
        assert check_ssh_host("a", value) == value


def test_the_k3s_config_line_cannot_be_injected_through_ansible_host(tmp_path: Path) -> None:
    hosts = {"a": {**BASE["a"], "ansible_host": "fe80::1%x\ndisable-network-policy: true"}, "b": BASE["b"]}
    with pytest.raises(UserError, match="ansible_host"):
        load_inventory(_inventory(tmp_path, hosts))


# -- Jinja in inventory values ---------------------------------------------------------------------------------


def _lookup(sentinel: Path) -> str:
    return "{{ lookup('ansible.builtin.pipe', 'touch " + str(sentinel) + " && echo python3') }}"


@pytest.mark.parametrize("field", ["netem_python", "ansible_user", "some_other_var"])
def test_netem_plan_evaluates_no_jinja_from_the_inventory(tmp_path: Path, field: str) -> None:
    sentinel = tmp_path / "pwned"
    inv = _inventory(tmp_path, {"a": {**BASE["a"], field: _lookup(sentinel)}, "b": BASE["b"]})
    lmap = tmp_path / "map.yaml"
    lmap.write_text("nodes: [a, b]\nrtt_ms: {a: {b: 10}}\n")
    res = _gesscale("netem", "plan", "-i", str(inv), "-m", str(lmap))
    assert not sentinel.exists()
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"host a: {field}" in res.stderr and "template" in res.stderr, res.stderr


def test_provision_plan_evaluates_no_jinja_from_the_inventory(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    hosts = {"a": {**BASE["a"], "region": _lookup(sentinel)}, "b": BASE["b"]}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"k3s_server": {"hosts": {"a": hosts["a"]}},
                                                          "k3s_agent": {"hosts": {"b": hosts["b"]}}}}}))
    res = _gesscale("provision", "-i", str(path), "--plan")
    assert not sentinel.exists()
    assert res.returncode == 2 and "host a: region" in res.stderr, res.stderr


def test_the_shipped_template_forms_are_read_without_evaluation(tmp_path: Path) -> None:
    hosts = {"a": {**BASE["a"], "ssh_known_hosts_file": "{{ inventory_dir }}/known_hosts",
                   "ansible_ssh_common_args": "-o UserKnownHostsFile={{ ssh_known_hosts_file }}",
                   "k3s_token": "{{ lookup('ansible.builtin.env', 'GESSCALE_K3S_TOKEN') }}"},
             "b": BASE["b"]}  # fmt: skip
    loaded = load_inventory(_inventory(tmp_path, hosts))
    assert loaded["a"].known_hosts == f"{tmp_path.resolve()}/known_hosts"
    unsafe = tmp_path / "unsafe.yml"  # a value marked !unsafe is text to Ansible: accepted as it is
    unsafe.write_text("all:\n  hosts:\n    a: {ansible_host: 10.9.0.1, pw: !unsafe 'x{{ y }}'}\n")
    assert load_inventory(unsafe)["a"].address == "10.9.0.1"
    for inventory in ("pi10", "local"):
        assert load_inventory(ROOT / "inventory" / inventory)


@pytest.mark.parametrize(("playbook", "field"), [
    ("site.yml", "region"), ("site.yml", "ansible_host"),  # ansible_host: templated to connect, unless delegated
    ("netem.yml", "ansible_host"), ("measure.yml", "ansible_host"), ("reset.yml", "ansible_host"),
])
def test_the_playbook_check_refuses_a_templated_value_unevaluated(tmp_path: Path, playbook: str, field: str) -> None:
    """Every playbook imports the check first (inventory-check.yml), so none of them, run directly with
    ansible-playbook, evaluates a lookup in an inventory value (netem.yml and measure.yml had no check)."""
    sentinel = tmp_path / "pwned"
    inv = _inventory(tmp_path, {"a": {**BASE["a"], field: _lookup(sentinel)}, "b": BASE["b"]})
    res = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                          str(ROOT / "playbooks" / playbook), "--tags", "no-such-tag", "--limit", "a",
                          "-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={sys.executable}"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert "TASK [Refuse values that would reach a command" in res.stdout, res.stdout[-2000:]
    assert res.returncode != 0 and "template" in res.stdout, res.stdout[-2000:]
    assert not sentinel.exists()
