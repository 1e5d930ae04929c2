"""The live controller killed with `kill -9` at a random moment after its first reconfiguration, on the real
testbed under load, then restarted from its state file: it resumes with the same model measurements, repeats no
reconfiguration, and the job's output holds every produced record exactly once (by unique key, after the job
stopped). Moved here from tests/testbed/test_live_e2e.py; the moment is now random and the key count is new.

At most 2 replicas: the first reconfiguration (1 -> 2) is the one the kill follows, and the restarted controller,
which still sees back pressure, must keep the 2 it finds (it may not add again). Without the cap its periods after
the restart waited for a second scale-up to take effect (about a minute of the test's 4.4 minutes in CI)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gesscale.testbed import Testbed, TestbedConfig
from gesscale.testbed.controller import read_reconfigurations
from gesscale.testbed.fleet import FleetPorts
from gesscale.testbed.job import JobSettings
from gesscale.testbed.keys import account_job
from tests.faults.support import fault
from tests.testbed.test_live_e2e import _leftovers, _wait


def _controller(run_dir: Path, log: Path, port: int) -> subprocess.Popen:
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "gesscale", "run", "--testbed", str(run_dir), "--control-period", "5s",
             "--warmup", "15s", "--max-replicas", "2", "--no-view", "--metrics-port", str(port)],
            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _measurements(state: Path) -> list[dict]:
    doc = json.loads(state.read_text())
    return doc["policy_state"]["model"]["measurements"]


@pytest.mark.e2e
def test_killed_controller_resumes_without_repeating_a_reconfiguration(tmp_path: Path) -> None:
    run_dir = tmp_path / "tb"
    # 0.25 core per node sustains fewer than the 1 100 records/s sent: the controller has to scale up
    cfg = TestbedConfig(run_dir=run_dir, nodes=["fog4", "fog5", "fog6"], node_cpu=0.25, kafka_port=15193,
                        ports=FleetPorts(master=15177, master_ui=15178, worker_base=15300, worker_ui_base=15400),
                        job=JobSettings(bootstrap="", http_port=15180, ui_port=15140, bp_window_s=5.0))
    f = fault("controller, then restarted from its state file")
    tb = Testbed.up(cfg)
    producer = ctl = None
    log = tmp_path / "controller.log"
    try:
        producer = subprocess.Popen(
            [sys.executable, "-m", "gesscale", "produce", "--rate", "1100", "--duration", "900", "--kafka",
             tb.job.settings.bootstrap, "--topic", "rides", "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        ctl = _controller(run_dir, log, 15191)
        reconf = run_dir / "reconfigurations.jsonl"
        _wait(lambda: len(read_reconfigurations(reconf)) >= 1, 420, "the first reconfiguration")
        with urllib.request.urlopen("http://127.0.0.1:15191/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert "gesscale_replicas" in text and "gesscale_reconfigurations_total" in text
        time.sleep(f.moment(0.0, 5.0))  # after the first reconfiguration, anywhere in a control period
        os.kill(ctl.pid, signal.SIGKILL)
        ctl.wait(30)
        before = _measurements(run_dir / "controller.json")  # written atomically: consistent after the kill
        assert before, "a scale-up by Gesscale follows an MST measurement"
        done_before = read_reconfigurations(reconf)
        ctl = _controller(run_dir, log, 15192)
        _wait(lambda: "resumed from" in log.read_text(), 120, "the restarted controller")
        line = next(x for x in log.read_text().splitlines() if "resumed from" in x)
        assert f": {len(before)} model measurements" in line
        periods = log.read_text().count("\nt=")
        _wait(lambda: log.read_text().count("\nt=") >= periods + 2, 180, "two periods after the restart")
        after = _measurements(run_dir / "controller.json")
        assert after[: len(before)] == before
        ctl.send_signal(signal.SIGTERM)
        assert ctl.wait(120) == 0, log.read_text()[-2000:]
        history = read_reconfigurations(reconf)
        assert history[: len(done_before)] == done_before
        assert len(history[-1]["nodes"]) <= 2, history  # the cap held across the restart
        placements = [tuple(sorted(r["nodes"])) for r in history]
        assert all(a != b for a, b in zip(placements, placements[1:], strict=False)), history
        for r in history:  # every node added was not hosting a replica already
            prior = set(r["nodes"]) - set(r["added"])
            assert not set(r["added"]) & prior
        # the data: stop the producer (it verifies by key and exits 130), then the job between micro-batches
        producer.send_signal(signal.SIGTERM)
        assert producer.wait(300) == 130  # it reads the topic back by key first
        tb.job.stop()
        acc = account_job(tb.job)
        f.record(acc.produced, acc.lost, acc.duplicated,
                 f"resumed with {len(before)} model measurements; {acc.unprocessed} not yet read when the job stopped")
        assert (acc.lost, acc.duplicated) == (0, 0), acc
        assert acc.processed + acc.unprocessed == acc.produced > 0
    finally:
        for p in (ctl, producer):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)
        tb.close()
    assert _leftovers(range(15300, 15303)) == []
