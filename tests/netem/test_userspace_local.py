"""The userspace engine for real on this machine: local hosts 127.0.0.51-53 (one machine, one address each),
real iptables rules, real delay daemons, delays (and a partition) measured with ping.

Tolerances are for a loaded 2-core CI machine: the median RTT within max(3 ms, 10 %) of the map.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.latency_map import latency_map_from_dict
from netem.engines import userspace_plans
from netem.hosts import Host
from netem.pairs import ping_pairs
from netem.remote import HostRemote
from netem.run import Options, clear_userspace_tag
from netem.userspace.deploy import UserspaceService
from netem.userspace.launch import daemon_pids, stats_file
from netem.userspace.rules import STATE_ROOT
from netem.validate import parse_ping_times, ping_times_command, validate

pytestmark = pytest.mark.e2e
TAG = "pytest-local"
ADDR = {"la": "127.0.0.51", "lb": "127.0.0.52", "lc": "127.0.0.53"}
HOSTS = {n: Host(n, None, a, connection="local") for n, a in ADDR.items()}
MAP = {"nodes": ["la", "lb", "lc"], "rtt_ms": {"la": {"lb": 30, "lc": 12}, "lb": {"lc": 20}},
       "changes": [{"t_s": 60, "pair": ["la", "lb"], "rtt_ms": 8}]}
INVENTORY = "all:\n  hosts:\n" + "".join(
    f"    {n}: {{ansible_host: {a}, ansible_connection: local}}\n" for n, a in ADDR.items())
MAP_YAML = """nodes: {la: {}, lb: {}, lc: {}}
rtt_ms: {la: {lb: 30, lc: 12}, lb: {lc: 20}}
changes:
  - {t_s: 60, pair: [la, lb], rtt_ms: 8}
"""
PARTITION_S = 10.0
PARTITION_YAML = f"""nodes: {{la: {{}}, lb: {{}}, lc: {{}}}}
rtt_ms: {{la: {{lb: 30, lc: 12}}, lb: {{lc: 20}}}}
changes:
  - {{t_s: 0, event: partition, pairs: [[la, lb]], duration_s: {PARTITION_S:g}}}
"""
FOREIGN = [["-s", "127.0.0.51/32", "-d", "127.0.0.59/32", "-j", "ACCEPT"],
           ["-s", "127.0.0.51/32", "-d", "127.0.0.58/32", "-m", "comment", "--comment", "gesscale-netem:other:la",
            "-j", "ACCEPT"]]


def _mangle() -> str:
    return subprocess.run(["iptables", "-t", "mangle", "-S", "OUTPUT"], capture_output=True, text=True).stdout


@pytest.fixture
def clean():
    """Whatever a test leaves of tag TAG (and the foreign rules it planted) is removed afterwards."""
    yield
    clear_userspace_tag(HOSTS, HostRemote(), Options(tag=TAG))
    for rule in FOREIGN:
        subprocess.run(["iptables", "-w", "-t", "mangle", "-D", "OUTPUT", *rule], capture_output=True)
    assert f"gesscale-netem:{TAG}:" not in _mangle()
    assert not daemon_pids(f"gesscale-netem:{TAG}:la")


def _rtt(src: str, dst: str, count: int = 5) -> tuple[int, list[float]]:
    out = subprocess.run(ping_times_command(ADDR[dst], count, 0.1, ADDR[src]).split(), capture_output=True,
                         text=True).stdout
    return parse_ping_times(out)


def _median(times: list[float]) -> float:
    return sorted(times)[len(times) // 2]


def test_cli_applies_measures_follows_the_schedule_and_clears_only_its_tag(tmp_path: Path, clean, capsys):
    inv, lmap_path = tmp_path / "hosts.yml", tmp_path / "map.yaml"
    inv.write_text(INVENTORY)
    lmap_path.write_text(MAP_YAML)
    common = ["-i", str(inv), "-m", str(lmap_path)]
    assert main(["netem", "plan", *common, "--tag", TAG, "--script"]) == 0
    planned = capsys.readouterr().out
    assert "userspace, NFQUEUE 4000" in planned
    assert (f"iptables -w -t mangle -A OUTPUT -s 127.0.0.51/32 -d 127.0.0.52/32 -m comment --comment "
            f"gesscale-netem:{TAG}:la -j NFQUEUE --queue-num 4000") in planned

    assert main(["netem", "apply", *common, "--tag", TAG]) == 0
    out = capsys.readouterr().out
    assert "engine: userspace (local hosts share loopback)" in out and out.count("daemon started") == 3
    assert main(["netem", "apply", *common, "--tag", TAG]) == 0
    assert capsys.readouterr().out.count("unchanged (daemon unchanged") == 3
    pid = daemon_pids(f"gesscale-netem:{TAG}:la")

    report, png = tmp_path / "rtt.json", tmp_path / "rtt.png"
    code = main(["netem", "measure", *common, "--count", "6", "--tolerance-ms", "3", "--json", str(report),
                 "--png", str(png)])
    text = capsys.readouterr().out
    assert code == 0, text
    doc = json.loads(report.read_text())
    assert doc["engine"] == "userspace" and doc["ok"] and len(doc["pairs"]) == 6
    la_lb = next(p for p in doc["pairs"] if (p["src"], p["dst"]) == ("la", "lb"))
    assert la_lb["rtt_ms"] == 30 and abs(la_lb["median_ms"] - 30) <= 3 and la_lb["p95_ms"] >= la_lb["median_ms"]
    assert png.read_bytes()[:4] == b"\x89PNG"

    # The schedule's change at t = 60 s: new values for the running daemons (SIGHUP), no restart.
    assert main(["netem", "apply", *common, "--tag", TAG, "--at", "60"]) == 0
    assert "daemon reloaded" in capsys.readouterr().out
    assert daemon_pids(f"gesscale-netem:{TAG}:la") == pid
    code = main(["netem", "measure", *common, "--at", "60", "--count", "5", "--tolerance-ms", "3"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert abs(_median(_rtt("la", "lb")[1]) - 8) <= 3

    for rule in FOREIGN:
        subprocess.run(["iptables", "-w", "-t", "mangle", "-A", "OUTPUT", *rule], check=True)
    assert main(["netem", "clear", *common, "--tag", TAG]) == 0
    assert "removed 6 rule(s)" in capsys.readouterr().out
    left = _mangle()
    assert f"gesscale-netem:{TAG}" not in left and not daemon_pids(f"gesscale-netem:{TAG}:la")
    assert "-d 127.0.0.59/32 -j ACCEPT" in left and "gesscale-netem:other:la" in left  # not ours: kept
    assert _median(_rtt("la", "lb")[1]) < 3  # no delay any more


def _service(queue_bypass: bool) -> UserspaceService:
    lmap = latency_map_from_dict(MAP)
    return UserspaceService(HOSTS, userspace_plans(lmap, HOSTS, TAG, queue_bypass=queue_bypass), HostRemote())


def test_a_dead_daemon_with_queue_bypass_is_caught_by_health_and_restarted(clean):
    svc = _service(queue_bypass=True)
    svc.apply()
    assert all(h.ok for h in svc.health())
    assert abs(_median(_rtt("la", "lb")[1]) - 30) <= 3
    for pid in daemon_pids(f"gesscale-netem:{TAG}:la"):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    # What --queue-bypass does: la -> lb now passes undelayed, the RTT silently halves ...
    assert abs(_median(_rtt("la", "lb")[1]) - 15) <= 3
    # ... and health says so.
    verdicts = {h.node: h for h in svc.health()}
    assert verdicts["lb"].ok and verdicts["lc"].ok
    assert "no delay daemon is running" in verdicts["la"].problems
    assert "nothing listens on NFQUEUE 4000" in verdicts["la"].problems
    restarted = svc.restart(["la"])
    assert restarted["la"]["pid"] in daemon_pids(f"gesscale-netem:{TAG}:la")
    assert all(h.ok for h in svc.health())
    assert abs(_median(_rtt("la", "lb")[1]) - 30) <= 3


def test_a_hung_daemon_is_caught_by_its_counters(clean):
    svc = _service(queue_bypass=False)
    svc.apply()
    svc.health()
    (pid,) = daemon_pids(f"gesscale-netem:{TAG}:lb")
    os.kill(pid, signal.SIGSTOP)
    try:
        sent, times = _rtt("lb", "la", count=3)  # without bypass the packets wait: a stall, never "no delay"
        assert sent == 3 and times == []
        problems = {h.node: h.problems for h in svc.health()}
        assert any("matched" in p and "received none" in p for p in problems["lb"]), problems
        assert problems["la"] == ()
    finally:
        os.kill(pid, signal.SIGCONT)


def test_measure_flags_a_pair_that_is_not_emulated(clean):
    svc = _service(queue_bypass=False)
    svc.apply()
    lmap = latency_map_from_dict(MAP)
    UserspaceService({"lc": HOSTS["lc"]}, {"lc": svc.plans["lc"]}, svc.remote).clear()  # lc's rules and daemon go
    v = validate(lmap, ping_pairs(HOSTS, lmap.names, svc.remote, 4, 0.1), "userspace", 3.0, 10.0)
    verdict = {(p.src, p.dst): p.ok for p in v.pairs}
    assert not v.ok
    assert verdict[("la", "lb")] and verdict[("lb", "la")]
    assert not verdict[("la", "lc")] and not verdict[("lc", "lb")]  # half the RTT is missing


def test_a_partition_cuts_the_pair_for_its_window_then_heals(tmp_path: Path, clean, capsys):
    """Map time 0 is the moment of apply: la-lb is cut both ways for PARTITION_S, then reachable again without
    any new apply (the daemons follow the clock); the other pairs keep their RTTs throughout."""
    inv, lmap_path, report = tmp_path / "hosts.yml", tmp_path / "map.yaml", tmp_path / "cut.json"
    inv.write_text(INVENTORY)
    lmap_path.write_text(PARTITION_YAML)
    common = ["-i", str(inv), "-m", str(lmap_path)]
    assert main(["netem", "apply", *common, "--tag", TAG]) == 0
    applied = time.time()  # the map's t = 0 was taken before the daemons started: the window ends before +10 s
    out, err = capsys.readouterr()
    assert "fog event" not in err, err  # the partition is applied: no warning
    assert "now is map time 0 s" in out and out.count("daemon started") == 3

    code = main(["netem", "measure", *common, "--at", "1", "--count", "3", "--tolerance-ms", "3", "--json",
                 str(report)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert text.count("yes (down as configured)") == 2, text
    pairs = {(p["src"], p["dst"]): p for p in json.loads(report.read_text())["pairs"]}
    assert {k for k, p in pairs.items() if p["down"]} == {("la", "lb"), ("lb", "la")}
    assert pairs[("la", "lb")]["sent"] == 3 and pairs[("la", "lb")]["received"] == 0
    assert pairs[("lb", "la")]["received"] == 0
    assert abs(pairs[("la", "lc")]["median_ms"] - 12) <= 3 and abs(pairs[("lb", "lc")]["median_ms"] - 20) <= 3
    for node in ("la", "lb"):  # dropped by the partition, not by loss (the counters are rewritten every 0.5 s)
        stats = json.loads(stats_file(Path(STATE_ROOT) / f"{TAG}.{node}" / "links.json").read_text())
        assert stats["partitioned"] >= 3 and stats["dropped"] == 0, stats

    time.sleep(max(0.0, applied + PARTITION_S + 0.5 - time.time()))
    code = main(["netem", "measure", *common, "--at", f"{PARTITION_S + 1:g}", "--count", "3", "--tolerance-ms", "3"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "down" not in text
    assert abs(_median(_rtt("la", "lb")[1]) - 30) <= 3

    assert main(["netem", "clear", *common, "--tag", TAG]) == 0
    assert "removed 6 rule(s)" in capsys.readouterr().out
    assert f"gesscale-netem:{TAG}" not in _mangle() and not daemon_pids(f"gesscale-netem:{TAG}:la")
