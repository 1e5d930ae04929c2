"""The WAN emulation's delay daemon killed with `kill -9` at a random moment while a keyed TCP stream crosses a
delayed link (fog1 -> fog2, 12 ms RTT): the testbed's health check reports the dead daemon (it must never pass as
emulated), the daemon is restarted, and the stream arrives whole, each key once (TCP retransmits what the dead
queue dropped). Moved here from tests/testbed/test_wan_live.py, with the stream added."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from gesscale.latency_map import latency_map_from_dict
from gesscale.testbed.wan import TestbedWan, WanSettings, daemon_pids
from gesscale.testbed.wan_measure import measure_links
from tests.faults.support import fault, tally

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="iptables and cgroups need root")

MAP = latency_map_from_dict({"nodes": ["fog1", "fog2", "fog3"],
                             "rtt_ms": {"fog1": {"fog2": 12.0, "fog3": 30.0}, "fog2": {"fog3": 20.0}}}, "test")
HOSTS = {"fog1": "127.0.0.61", "fog2": "127.0.0.62"}  # not the addresses of a demo's fog nodes
KEYS = 4000
SENDER = """import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 0)); s.connect((sys.argv[2], int(sys.argv[3])))
for i in range(int(sys.argv[4])):
    s.sendall(f"k{i}\\n".encode())
    time.sleep(0.001)
s.shutdown(socket.SHUT_WR); s.recv(1); s.close()
"""


def _receive(server: socket.socket, counts: Counter[str]) -> None:
    conn, _ = server.accept()
    with conn:
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        counts.update(data.decode().split())


@pytest.mark.e2e
def test_delay_daemon_killed_mid_stream_is_reported_and_nothing_is_lost(tmp_path: Path) -> None:
    f = fault("WAN delay daemon")
    wan = TestbedWan.start(WanSettings(MAP, "fog3"), HOSTS, os.getpid(), tmp_path)
    try:
        assert wan.health() is None
        counts: Counter[str] = Counter()
        with socket.create_server((HOSTS["fog2"], 0)) as server:
            receiver = threading.Thread(target=_receive, args=(server, counts))
            receiver.start()
            procs = wan.groups.parent / "fog1" / "cgroup.procs"  # the sender is fog1's traffic
            sender = subprocess.Popen(["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(procs), sys.executable,
                                       "-c", SENDER, HOSTS["fog1"], HOSTS["fog2"], str(server.getsockname()[1]),
                                       str(KEYS)])
            time.sleep(f.moment(0.5, 3.0))
            for pid in daemon_pids(wan.plan.tag):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while wan.health() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            reported = wan.health()
            assert reported is not None  # a stopped daemon must never pass as emulated
            wan.restart("killed by the test")
            assert sender.wait(120) == 0
            receiver.join(60)
        lost, duplicated = tally(counts, (f"k{i}" for i in range(KEYS)))
        f.record(KEYS, lost, duplicated, f"health check: {reported}; restarted")
        assert (lost, duplicated) == (0, 0)
        assert wan.health() is None and wan.gaps and wan.gaps[0]["reason"] == "killed by the test"
        check = measure_links(MAP, wan.describe()["links"], HOSTS, wan.groups.parent, wan.site, count=10)
        assert check.ok, check.pairs
    finally:
        wan.stop()
