"""The userspace engine over real SSH on the namespace fleet: applied, measured, health-checked, cleared.

Each fleet host is a network namespace with its own netfilter tables and NFQUEUE, and sees this machine's /usr
(iptables) and /work (the project) through its overlays, so the delay daemon runs there from the project's venv:
`--python <venv>/bin/python` (inventory variable `netem_python` on a real cluster; docs/wan-emulation.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gesscale.cli import main

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventory" / "local"
TAG = "pytest-fleet"
MAP = """nodes: {gs-h1: {}, gs-h2: {}, gs-h3: {}}
rtt_ms:
  gs-h1: {gs-h2: 8.7, gs-h3: 26.1}
  gs-h2: {gs-h3: 18.8}
links:
  gs-h1: {gs-h3: {jitter_ms: 1.0, bandwidth_mbit: 40}}
"""

pytestmark = pytest.mark.e2e


@pytest.fixture
def common(fleet, tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text(MAP)
    args = ["-i", str(INVENTORY), "-m", str(path), "--python", sys.executable]
    try:
        yield args
    finally:
        main(["netem", "clear", *args, "--tag", TAG])


def test_fleet_hosts_have_iptables_and_the_venv_imports_the_daemon(fleet):
    for host in fleet.hosts:
        cmd = f"sudo iptables -t mangle -S OUTPUT && sudo {sys.executable} -c 'import netem.userspace.daemon'"
        res = fleet.ssh(host, cmd)
        assert res.returncode == 0, (host.name, res.stderr)


def test_userspace_engine_over_ssh_delays_as_the_map_and_is_watched(fleet, common, tmp_path, capsys):
    assert main(["netem", "apply", *common, "--tag", TAG]) == 0
    out = capsys.readouterr().out
    assert "engine: userspace (no netem on gs-h1, gs-h2, gs-h3)" in out, out
    assert out.count("daemon started") == 3

    h1 = fleet.hosts[0]
    rules = fleet.ssh(h1, "sudo iptables -t mangle -S OUTPUT").stdout
    assert f'-A OUTPUT -s 10.231.0.11/32 -d 10.231.0.13/32 -m comment --comment "gesscale-netem:{TAG}:gs-h1" ' \
           "-j NFQUEUE --queue-num 4000" in rules
    assert "class htb 1:10 root leaf 10: prio 0 rate 40Mbit" in fleet.ssh(h1, "/usr/sbin/tc class show dev eth0").stdout

    report = tmp_path / "fleet.json"
    code = main(["netem", "measure", *common[:4], "--count", "8", "--tolerance-ms", "3", "--json", str(report),
                 "--png", str(tmp_path / "fleet.png")])
    text = capsys.readouterr().out
    with capsys.disabled():
        print(text)  # the measured table, shown with pytest -s
    assert code == 0, text
    doc = json.loads(report.read_text())
    assert doc["ok"] and len(doc["pairs"]) == 6 and doc["engine"] == "userspace"
    for pair in doc["pairs"]:
        assert abs(pair["median_ms"] - pair["rtt_ms"]) <= max(3, 0.1 * pair["rtt_ms"]), pair

    assert main(["netem", "health", *common, "--tag", TAG, "--interval", "0.5"]) == 0
    capsys.readouterr()
    killed = fleet.ssh(fleet.hosts[1], f"sudo kill -9 $(cat /run/gesscale-netem/{TAG}.gs-h2/links.pid)")
    assert killed.returncode == 0, killed.stderr
    assert main(["netem", "health", *common, "--tag", TAG, "--interval", "0.5"]) == 1
    assert "gs-h2        NOT OK: no delay daemon is running" in capsys.readouterr().out
    assert main(["netem", "health", *common, "--tag", TAG, "--interval", "0.5", "--restart"]) == 0
    assert "gs-h2        restarted" in capsys.readouterr().out

    assert main(["netem", "clear", *common, "--tag", TAG]) == 0
    for host in fleet.hosts:
        assert "gesscale-netem" not in fleet.ssh(host, "sudo iptables -t mangle -S OUTPUT").stdout
        assert "htb" not in fleet.ssh(host, "/usr/sbin/tc qdisc show dev eth0").stdout
        assert fleet.ssh(host, "pgrep -f netem.userspace").stdout.strip() == ""


CUT_S = 12.0  # the partition's length and the flap's down phase: both pairs down in [0, 12), up in [12, 24)
EVENTS_MAP = f"""nodes: {{gs-h1: {{}}, gs-h2: {{}}, gs-h3: {{}}}}
rtt_ms:
  gs-h1: {{gs-h2: 8.7, gs-h3: 26.1}}
  gs-h2: {{gs-h3: 18.8}}
changes:
  - {{t_s: 0, event: partition, pairs: [[gs-h1, gs-h3]], duration_s: {CUT_S:g}}}
  - {{t_s: 0, event: flap, pair: [gs-h2, gs-h3], period_s: {2 * CUT_S:g}, down_s: {CUT_S:g}}}
"""


def test_a_partition_and_a_flap_over_ssh_are_measured_as_configured_then_cleared(fleet, tmp_path, capsys):
    """Issue 32: on the SSH fleet, a partition (gs-h1-gs-h3) and a flap (gs-h2-gs-h3) cut their pairs both ways
    (real pings: no echo), the daemons heal them on their own clock (no new apply), the untouched pair keeps its
    RTT, and clear leaves no rule, qdisc or daemon on any host."""
    import time

    path = tmp_path / "events.yaml"
    path.write_text(EVENTS_MAP)
    args = ["-i", str(INVENTORY), "-m", str(path), "--python", sys.executable]
    try:
        assert main(["netem", "apply", *args, "--tag", TAG]) == 0
        applied = time.time()  # the map's t = 0 is taken before the daemons start: the cut ends before this + 12
        out, err = capsys.readouterr()
        assert "fog event" not in err and out.count("daemon started") == 3, (out, err)

        report = tmp_path / "cut.json"
        code = main(["netem", "measure", *args[:4], "--at", "1", "--count", "3", "--tolerance-ms", "3",
                     "--json", str(report)])
        text = capsys.readouterr().out
        assert time.time() - applied < CUT_S, "the measurement outlasted the cut: the test cannot judge it"
        assert code == 0, text
        pairs = {(p["src"], p["dst"]): p for p in json.loads(report.read_text())["pairs"]}
        cut = {("gs-h1", "gs-h3"), ("gs-h3", "gs-h1"), ("gs-h2", "gs-h3"), ("gs-h3", "gs-h2")}
        assert {k for k, p in pairs.items() if p.get("down")} == cut, text
        assert all(pairs[k]["received"] == 0 for k in cut), text
        assert abs(pairs[("gs-h1", "gs-h2")]["median_ms"] - 8.7) <= 3, text
        stats = fleet.ssh(fleet.hosts[0], f"sudo cat /run/gesscale-netem/{TAG}.gs-h1/links.stats.json").stdout
        assert json.loads(stats)["partitioned"] >= 3, stats  # dropped as cut, not as random loss

        time.sleep(max(0.0, applied + CUT_S + 0.5 - time.time()))
        code = main(["netem", "measure", *args[:4], "--at", f"{CUT_S + 1:g}", "--count", "3", "--tolerance-ms",
                     "3", "--json", str(report)])
        text = capsys.readouterr().out
        assert time.time() - applied < 2 * CUT_S, "the measurement outlasted the flap's up phase"
        assert code == 0, text
        back = {(p["src"], p["dst"]): p for p in json.loads(report.read_text())["pairs"]}
        assert not any(p.get("down") for p in back.values()), text
        assert abs(back[("gs-h1", "gs-h3")]["median_ms"] - 26.1) <= 3 and \
            abs(back[("gs-h2", "gs-h3")]["median_ms"] - 18.8) <= 3, text
    finally:
        assert main(["netem", "clear", *args, "--tag", TAG]) == 0
    for host in fleet.hosts:
        assert "gesscale-netem" not in fleet.ssh(host, "sudo iptables -t mangle -S OUTPUT").stdout
        assert fleet.ssh(host, "pgrep -f netem.userspace").stdout.strip() == ""
