"""site.yml's prereq, raspberrypi and mqtt roles over real SSH with become, run twice: the second changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from gesscale.cli import main
from netem.playbooks import run_playbook

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventory" / "local"
PASSWORD = "fleet-only-secret"  # the fleet lives for this test module only
CMDLINE = "console=serial0,115200 root=PARTUUID=1234-02 rootfstype=ext4 fsck.repair=yes rootwait"


def _connect(host: str, user: str | None, password: str | None) -> mqtt.ReasonCode:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    if user is not None:
        client.username_pw_set(user, password)
    done = threading.Event()
    result: list[mqtt.ReasonCode] = []

    def on_connect(_c, _u, _f, reason, _p):
        result.append(reason)
        done.set()

    client.on_connect = on_connect
    client.connect(host, 1883, keepalive=10)
    client.loop_start()
    try:
        assert done.wait(15), "no CONNACK from the broker"
    finally:
        client.loop_stop()
        client.disconnect()
    return result[0]


@pytest.mark.e2e
def test_prereq_raspberrypi_and_mqtt_roles_are_idempotent(fleet, monkeypatch, capsys):
    monkeypatch.setenv("GESSCALE_MQTT_PASSWORD", PASSWORD)
    for host in fleet.hosts:  # a Pi's boot partition, on hosts that are not Pis (raspberrypi_force below)
        res = fleet.ssh(host, f"sudo mkdir -p /boot/firmware && echo '{CMDLINE}' | sudo tee /boot/firmware/cmdline.txt")
        assert res.returncode == 0, res.stderr
    extra = {"raspberrypi_force": True, "raspberrypi_reboot": False}

    first = run_playbook("site", INVENTORY, tags="prereq,raspberrypi,mqtt", extra_vars=extra)
    assert first.ok, first.failures
    assert set(first.recap) == {h.name for h in fleet.hosts}
    assert all(r.changed > 0 for r in first.recap.values())

    # The second run goes through the CLI, which prints each task and host result live, then the recap.
    code = main(["provision", "--inventory", str(INVENTORY), "--tags", "prereq,raspberrypi,mqtt",
                 "-e", "raspberrypi_force=true", "-e", "raspberrypi_reboot=false"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "TASK Install the base packages" in out and "TASK Keep each user's password" in out
    recap = [line.split() for line in out.splitlines() if line.strip().startswith("gs-h") and "changed=" in line]
    assert sorted(r[0] for r in recap) == [h.name for h in fleet.hosts]
    assert all("changed=0" in r and "failed=0" in r for r in recap), out
    assert "provision done: 0 change(s)" in out

    for host in fleet.hosts:
        def read(command: str, on=host) -> str:
            return fleet.ssh(on, command).stdout.strip()

        assert read("cat /boot/firmware/cmdline.txt") == CMDLINE + " cgroup_memory=1 cgroup_enable=memory"
        assert "NTP=0.debian.pool.ntp.org" in read("cat /etc/systemd/timesyncd.conf.d/gesscale.conf")
        assert read("stat -c %U /etc/sysctl.d/90-gesscale.conf") == "root"
        assert read("cat /proc/sys/net/ipv4/ip_forward") == "1"
    assert not Path("/etc/sysctl.d/90-gesscale.conf").exists()  # written on the hosts, not on this machine

    broker = next(h for h in fleet.hosts if h.name == "gs-h3")  # the `mqtt` group of inventory/local
    assert not _connect(broker.address, "producer", PASSWORD).is_failure
    assert _connect(broker.address, "producer", "wrong").is_failure
    assert _connect(broker.address, None, None).is_failure
    stored = fleet.ssh(broker, "sudo cat /etc/mosquitto/gesscale.passwd").stdout
    assert stored.startswith("producer:$7$") and PASSWORD not in stored
