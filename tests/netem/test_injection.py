"""Shell injection through every inventory field that reaches a command, a script or a rendered config file.

Each field gets each payload (quote break-out, command substitution, backticks, a newline that would end the tc
script's comment line, a path that climbs out of the marker folder, an ssh option in place of a host); reading
the inventory refuses it with one line naming the host and the field, before anything runs, and the payload's
`touch` never happens. The plan command, the Ansible filter the netem role uses and the plan builder itself are
tried too, and two hosts on one address are refused.
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
from netem.inventory_fields import CHECKS
from netem.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]
MAP = "nodes: [a, b]\nrtt_ms: {a: {b: 10}}\n"
BASE = {"a": {"ansible_host": "10.9.0.1", "netem_device": "eth0"},
        "b": {"ansible_host": "10.9.0.2", "netem_device": "eth0"}}


def _payloads(sentinel: Path) -> list[str]:
    return [
        f"eth0'; touch {sentinel}; '",
        f"eth0\ntouch {sentinel}",
        f"$(touch {sentinel})",
        f"`touch {sentinel}`",
        f"x;touch {sentinel}",
        "../../etc/cron.d/x",
        "eth0 ",
        f"-oProxyCommand=touch {sentinel}",  # an option where ssh expects a host
    ]


def _inventory(tmp: Path, field: str, value: object) -> Path:
    hosts = {n: dict(v) for n, v in BASE.items()}
    hosts["a"][field] = value
    path = tmp / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return path


# every field the inventory check covers: connection and netem variables, and the node label sources
FIELDS = sorted(CHECKS)
PATH_FIELDS = ("ansible_ssh_private_key_file", "netem_python")


def test_the_checked_fields_are_those_that_reach_commands() -> None:
    assert {"ansible_host", "ansible_user", "ansible_port", "ansible_ssh_private_key_file", "ansible_connection",
            "netem_address", "netem_device", "netem_python", "region", "arch", "latitude", "longitude",
            "cpu_budget"} == set(FIELDS)


@pytest.mark.parametrize("field", FIELDS)
def test_every_payload_in_every_field_is_refused_before_anything_runs(tmp_path: Path, field: str) -> None:
    sentinel = tmp_path / "pwned"
    for payload in _payloads(sentinel):
        if payload.startswith("../") and field in PATH_FIELDS:
            continue  # a path may climb out of a folder: it names the user's own file on the controller/host
        with pytest.raises(UserError) as err:
            load_inventory(_inventory(tmp_path, field, payload))
        line = str(err.value)
        assert "\n" not in line and f"host a: {field} " in line, line
    assert not sentinel.exists()


def test_valid_values_still_pass(tmp_path: Path) -> None:
    hosts = {"a": {"ansible_host": "pi01.lan", "ansible_user": "pi", "ansible_port": 2222,
                   "ansible_ssh_private_key_file": "~/.ssh/id_ed25519", "ansible_connection": "ssh",
                   "netem_address": "10.9.0.1", "netem_device": "eth0.100", "netem_python": "/usr/bin/python3",
                   "region": "umea", "arch": "arm64", "latitude": -33.9, "longitude": 151.2, "cpu_budget": 0.5},
             "b": {"ansible_host": "10.9.0.2"}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    loaded = load_inventory(path)
    assert loaded["a"].device == "eth0.100" and loaded["a"].port == 2222


def test_netem_plan_refuses_an_injected_device_and_prints_no_script(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    inv = _inventory(tmp_path, "netem_device", f"eth0'; touch {sentinel}; '")
    lmap = tmp_path / "map.yaml"
    lmap.write_text(MAP)
    res = subprocess.run([sys.executable, "-m", "gesscale", "netem", "plan", "-i", str(inv), "-m", str(lmap),
                          "--script"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and "tc " not in res.stdout, res.stdout
    assert res.stderr.count("\n") == 1 and "netem_device" in res.stderr, res.stderr
    assert not sentinel.exists()


def test_the_playbook_filter_refuses_an_injected_device(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "playbooks" / "filter_plugins"))
    try:
        from ansible.errors import AnsibleFilterError
        from gesscale_netem import gesscale_tc_plan
    finally:
        sys.path.pop(0)
    lmap = tmp_path / "map.yaml"
    lmap.write_text(MAP)
    hostvars = {n: dict(v) for n, v in BASE.items()}
    ok = gesscale_tc_plan(str(lmap), "a", hostvars, "eth0", "structural")
    assert ok["marker"] == "/run/gesscale-netem/eth0.sh"
    for device in ("eth0\ntouch /tmp/x", "../../etc/cron.d/x"):  # the role's device may come from `ip route get`
        with pytest.raises(AnsibleFilterError, match="netem_device"):
            gesscale_tc_plan(str(lmap), "a", hostvars, device, "structural")
    hostvars["b"]["ansible_user"] = "pi; reboot"
    with pytest.raises(AnsibleFilterError, match="ansible_user"):
        gesscale_tc_plan(str(lmap), "a", hostvars, "eth0", "structural")


def test_the_plan_builder_refuses_a_bad_device_whoever_calls_it() -> None:
    lmap = latency_map_from_dict(yaml.safe_load(MAP))
    with pytest.raises(UserError, match="netem_device"):
        build_plan(lmap, {"a": "10.9.0.1", "b": "10.9.0.2"}, {"a": "eth0\nreboot", "b": "eth0"})


def test_two_hosts_on_one_address_are_refused(tmp_path: Path) -> None:
    path = _inventory(tmp_path, "ansible_host", "10.9.0.2")
    with pytest.raises(UserError, match=r"hosts a and b have the same address 10\.9\.0\.2") as err:
        load_inventory(path)
    assert "\n" not in str(err.value)
    path = _inventory(tmp_path, "netem_address", "10.9.0.2")  # the cluster address counts, not the SSH one
    with pytest.raises(UserError, match="same address"):
        load_inventory(path)


@pytest.mark.parametrize(("inventory", "refused"), [("bad", True), ("pi10", False)])
def test_site_yml_run_directly_checks_the_inventory_first(tmp_path: Path, inventory: str, refused: bool) -> None:
    sentinel = tmp_path / "pwned"
    inv = (_inventory(tmp_path, "netem_device", f"eth0'; touch {sentinel}; '") if inventory == "bad"
           else ROOT / "inventory" / "pi10")
    # A tag no role has: only the check (and fact gathering, made local so that nothing is contacted) runs.
    res = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                          str(ROOT / "playbooks" / "site.yml"), "--tags", "no-such-tag", "--limit", "pi01,a",
                          "-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={sys.executable}"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert "TASK [Refuse values that would reach a command" in res.stdout, res.stdout[-2000:]  # the check ran
    assert (res.returncode != 0) == refused, res.stdout[-2000:]
    assert ("is not an interface name" in res.stdout) == refused, res.stdout[-2000:]
    assert not sentinel.exists()
