"""The testbed's WAN emulation for real (iptables, NFQUEUE, the delay daemon, cgroup-v2 groups; no Spark):
measured delays, cleanup of its own rules only, and a killed owner's
leftovers swept by the next testbed. (The daemon killed with kill -9 mid-stream is in tests/faults/.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gesscale.latency_map import latency_map_from_dict
from gesscale.testbed.wan import TestbedWan, WanSettings, bound_queues, daemon_pids, sweep_stale
from gesscale.testbed.wan_measure import measure_links

ROOT = Path(__file__).resolve().parents[2]
MAP = latency_map_from_dict({"nodes": ["fog1", "fog2", "fog3"],
                             "rtt_ms": {"fog1": {"fog2": 12.0, "fog3": 30.0}, "fog2": {"fog3": 20.0}}}, "test")
HOSTS = {"fog1": "127.0.0.61", "fog2": "127.0.0.62"}  # not the addresses of a demo's fog nodes


def _mangle() -> str:
    return subprocess.run(["iptables", "-w", "5", "-t", "mangle", "-S"], capture_output=True, text=True).stdout


@pytest.fixture
def wan(tmp_path: Path):  # noqa: ANN201
    w = TestbedWan.start(WanSettings(MAP, "fog3"), HOSTS, os.getpid(), tmp_path)
    yield w
    w.stop()
    assert w.plan.chain not in _mangle() and not daemon_pids(w.plan.tag) and not w.groups.parent.exists()


def test_every_link_delays_by_its_rtt(wan: TestbedWan) -> None:
    measures = measure_links(MAP, wan.describe()["links"], HOSTS, wan.groups.parent, wan.site).pairs
    assert {(m.src, m.dst) for m in measures} == {("fog1", "fog2"), ("fog2", "fog1"), ("fog1", "fog3"),
                                                  ("fog3", "fog1"), ("fog2", "fog3"), ("fog3", "fog2")}
    bad = [m for m in measures if not m.ok]
    assert not bad, bad
    # the site's own traffic (broker, driver, anything outside the fog nodes' groups) is untouched
    out = subprocess.run(["ping", "-n", "-c", "5", "-i", "0.05", "127.0.0.70"], capture_output=True, text=True).stdout
    times = [float(t) for t in re.findall(r"time=([\d.]+)", out)]
    assert len(times) == 5 and max(times) < 5, out


def test_stop_removes_only_its_own_rules(tmp_path: Path) -> None:
    foreign = ["OUTPUT", "-d", "127.0.0.99/32", "-m", "comment", "--comment", "not-gesscale", "-j", "ACCEPT"]
    subprocess.run(["iptables", "-w", "5", "-t", "mangle", "-A", *foreign], check=True)
    try:
        w = TestbedWan.start(WanSettings(MAP, "fog3"), HOSTS, os.getpid(), tmp_path)
        w.stop()
        assert "not-gesscale" in _mangle() and f"gesscale-netem:{w.plan.tag}" not in _mangle()
    finally:
        subprocess.run(["iptables", "-w", "5", "-t", "mangle", "-D", *foreign], check=True)


def test_the_leftovers_of_a_killed_testbed_are_swept_by_the_next(tmp_path: Path) -> None:
    script = (f"import sys, os, time; sys.path.insert(0, {str(ROOT)!r});"
              "from pathlib import Path;"
              "from gesscale.testbed.wan import TestbedWan, WanSettings;"
              "from gesscale.latency_map import latency_map_from_dict as f;"
              "m = f({'nodes': ['fog1', 'fog2', 'fog3'], 'default_rtt_ms': 10}, 't');"
              f"w = TestbedWan.start(WanSettings(m, 'fog3'), {HOSTS!r}, os.getpid(), Path({str(tmp_path)!r}));"
              "print(w.plan.chain, w.plan.tag, w.plan.queue, flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        chain, tag, queue = owner.stdout.readline().split()  # type: ignore[union-attr]
        assert chain in _mangle() and daemon_pids(tag) and int(queue) in bound_queues()
    finally:
        owner.kill()
        owner.wait(10)
    removed = sweep_stale()
    assert chain in removed and chain not in _mangle() and not daemon_pids(tag)
    assert int(queue) not in bound_queues()
    assert any(r.endswith(f"gesscale-testbed-{owner.pid}") for r in removed), removed  # its network groups


def test_the_maps_changes_are_applied_at_their_time(tmp_path: Path) -> None:
    moving = latency_map_from_dict({"nodes": ["fog1", "fog2", "fog3"], "default_rtt_ms": 10.0,
                                    "changes": [{"t_s": 0.5, "pair": ["fog1", "fog2"], "rtt_ms": 40.0}]}, "moving")
    w = TestbedWan.start(WanSettings(moving, "fog3"), HOSTS, os.getpid(), tmp_path)
    try:
        link = [x for x in w.describe()["links"] if (x["src"], x["dst"]) == ("fog1", "fog2")]
        before = measure_links(moving.at(0), link, HOSTS, w.groups.parent, w.site, count=10).pairs[0]
        w.follow_schedule(time.time())
        deadline = time.monotonic() + 10
        while not w.changes_applied and time.monotonic() < deadline:
            time.sleep(0.05)
        link = [x for x in w.describe()["links"] if (x["src"], x["dst"]) == ("fog1", "fog2")]
        after = measure_links(moving.at(1), link, HOSTS, w.groups.parent, w.site, count=10).pairs[0]
    finally:
        w.stop()
    assert before.ok and before.rtt_ms == 10.0
    assert after.ok and after.rtt_ms == 40.0 and w.changes_applied[0]["t_s"] == 0.5
    assert w.health() is not None  # stopped: the daemon is gone
