"""`gesscale provision --plan`: per host, what site.yml would do, from the inventory and the roles' variables,
without any connection (sockets are blocked in these tests) and without showing a secret."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gesscale.cli import app
from netem.provision_plan import format_plan, provision_plan

ROOT = Path(__file__).resolve().parents[2]
PI10 = ROOT / "inventory" / "pi10"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the plan tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("GESSCALE_K3S_TOKEN", "token-must-not-show-0123456789")
    monkeypatch.setenv("GESSCALE_MQTT_PASSWORD", "password-must-not-show")


def _by_host(**kwargs: Any) -> dict[str, dict[str, list[str]]]:
    return {p.host: {r.role: r.lines for r in p.roles} for p in provision_plan("site", PI10, **kwargs)}


def test_each_host_gets_the_roles_of_its_groups_with_values_from_the_inventory() -> None:
    plan = _by_host()
    assert list(plan) == [f"pi{i:02d}" for i in range(1, 11)]
    assert list(plan["pi01"]) == ["prereq", "raspberrypi", "k3s_server", "spark_rbac"]
    assert list(plan["pi02"]) == ["prereq", "raspberrypi", "k3s_agent", "kafka"]
    assert list(plan["pi03"]) == ["prereq", "raspberrypi", "k3s_agent", "mqtt"]
    server = "\n".join(plan["pi01"]["k3s_server"])
    assert "k3s v1.31.4+k3s1 server" in server and "node-ip 192.168.50.101" in server
    # labels computed by the role's Jinja from the inventory's coordinates; no pool label (the controller's)
    assert "gesscale.io/lon=0.128W" in "\n".join(plan["pi07"]["k3s_agent"])
    assert "gesscale.io/lat=33.869S" in "\n".join(plan["pi10"]["k3s_agent"])
    assert "gesscale.io/pool" not in format_plan(provision_plan("site", PI10))
    assert "joins https://192.168.50.101:6443" in "\n".join(plan["pi05"]["k3s_agent"])
    kafka = "\n".join(plan["pi02"]["kafka"])
    assert "listener 192.168.50.102:9092" in kafka and "8 partitions" in kafka and "kafka_2.13-3.9.1" in kafka
    assert "users (passwords not shown): producer" in "\n".join(plan["pi03"]["mqtt"])


def test_no_template_is_left_and_no_secret_is_shown() -> None:
    text = format_plan(provision_plan("site", PI10))
    assert "{{" not in text and "{%" not in text
    assert "token-must-not-show" not in text and "password-must-not-show" not in text


def test_tags_limit_and_extra_vars_select_and_override() -> None:
    plan = _by_host(tags="k3s", limit="pi02,pi03", extra_vars={"k3s_version": "v1.30.2+k3s2"})
    assert {h: list(r) for h, r in plan.items()} == {"pi02": ["k3s_agent"], "pi03": ["k3s_agent"]}
    assert "k3s v1.30.2+k3s2 agent" in plan["pi02"]["k3s_agent"][0]
    assert "prereq" not in _by_host(skip_tags="prereq")["pi01"]


def test_the_command_prints_the_plan_and_refuses_a_bad_inventory(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["provision", "-i", str(PI10), "--plan", "--limit", "pi03"])
    assert res.exit_code == 0, res.output
    assert "nothing contacted" in res.output and "pi03:" in res.output and "pi01:" not in res.output
    bad = tmp_path / "hosts.yml"
    bad.write_text("all:\n  hosts:\n    a: {ansible_host: 10.0.0.1, ansible_user: 'pi;reboot'}\n")
    res = subprocess.run([sys.executable, "-m", "gesscale", "provision", "-i", str(bad), "--plan"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "ansible_user" in res.stderr, res.stderr


@pytest.mark.parametrize(("token", "says"), [
    (None, "token MISSING: k3s_token is empty; export GESSCALE_K3S_TOKEN"),
    ("", "token MISSING"),
    ("short", "token TOO SHORT"),
    ("token-must-not-show-0123456789", "token set in the inventory (not shown)"),
])
def test_the_plan_says_whether_the_token_is_set_and_how_to_set_it(monkeypatch: pytest.MonkeyPatch,
                                                                   token: str | None, says: str) -> None:
    if token is None:
        monkeypatch.delenv("GESSCALE_K3S_TOKEN")
    else:
        monkeypatch.setenv("GESSCALE_K3S_TOKEN", token)
    server = "\n".join(_by_host()["pi01"]["k3s_server"])
    assert says in server and "token-must-not-show" not in server
