"""End to end on the real testbed: a shortened live demo (exactly once by unique keys, at least one
reconfiguration, nothing left behind), and a controller killed -9 mid-run that resumes with the same model
measurements and repeats no reconfiguration."""

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
from gesscale.testbed.cgroups import PREFIX
from gesscale.testbed.controller import read_reconfigurations
from gesscale.testbed.fleet import FleetPorts
from gesscale.testbed.job import JobSettings

CPU_ROOT = Path("/sys/fs/cgroup/cpu") if Path("/sys/fs/cgroup/cpu").is_dir() else Path("/sys/fs/cgroup")


def _leftovers(worker_ports: range) -> list[str]:
    """Workers of this test's fleet (by their ports) still running, and this process's cgroups."""
    out = []
    wanted = {str(p).encode() for p in worker_ports}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ports = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == b"--port"}
        if b"org.apache.spark.deploy.worker.Worker" in argv and ports & wanted:
            out.append(f"pid {proc.name}: {b' '.join(argv)[-160:]!r}")
    out += [str(p) for p in CPU_ROOT.glob(f"{PREFIX}{os.getpid()}")]
    return out


def _wait(predicate, timeout_s: float, what: str, poll_s: float = 1.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@pytest.mark.e2e
def test_shortened_demo_is_exactly_once_with_a_reconfiguration(tmp_path: Path) -> None:
    from gesscale.testbed.demo import DemoOptions, run_demo

    # The day is sized from what one node sustains on this machine, measured in the warm-up: its peak is 1.5 times
    # that, so one node cannot keep up with it however fast the machine is (a fixed load once made this a coin toss).
    opts = DemoOptions(out=tmp_path / "demo", nodes=3, node_cpu=0.25, day_s=120, peak_load=1.5,
                       control_period_s=5.0, warmup_s=10.0, drain_timeout_s=300.0, sim_policies="gesscale,ideal",
                       port_shift=350)  # not the ports of `make demo` or of the other test
    report = run_demo(opts, say=lambda s: None)
    load = report["load"]
    changes = [(r["kind"], r["nodes"]) for r in report["reconfigurations"]]
    print(f"\nshortened demo: one node sustained {load['node_rate']:.0f}/s; {load['rides_per_day']} rides, peak "
          f"{load['peak_rate']:.0f}/s; reconfigurations {changes}",
          flush=True)
    assert load["peak_rate"] == pytest.approx(1.5 * load["node_rate"], rel=0.01)
    assert report["produced"] > 0
    assert report["lost"] == 0, report["backlog_at_stop"]
    assert report["duplicated"] == 0
    assert report["processed"] == report["produced"]
    assert len(report["reconfigurations"]) >= 1, report["periods"]
    for r in report["reconfigurations"]:
        assert r["kind"] in ("up", "down") and r["pause_s"] >= 0 and r["nodes"]
    saved = json.loads((tmp_path / "demo" / "report.json").read_text())
    assert {k: saved[k] for k in ("produced", "processed", "lost", "duplicated")} == \
        {k: report[k] for k in ("produced", "processed", "lost", "duplicated")}
    assert Path(report["timeline_png"]).stat().st_size > 0
    # the map's RTTs were really there between the fog nodes and the site, all run long
    net = report["network"]
    assert net["emulated"] and net["pairs"] and net["ok"] and net["links_ok"] == len(net["pairs"]), net["pairs"]
    assert net["gaps"] == []  # the delay daemon never had to be restarted
    assert set(report["simulation"]) == {"gesscale", "ideal"}
    assert _leftovers(range(15450, 15450 + opts.nodes)) == []


def _controller(run_dir: Path, log: Path, port: int) -> subprocess.Popen:
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "gesscale", "run", "--testbed", str(run_dir), "--control-period", "5s",
             "--warmup", "30s", "--no-view", "--metrics-port", str(port)],
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
        _wait(lambda: log.read_text().count("\nt=") >= periods + 3, 180, "three periods after the restart")
        after = _measurements(run_dir / "controller.json")
        assert after[: len(before)] == before
        ctl.send_signal(signal.SIGTERM)
        assert ctl.wait(120) == 0, log.read_text()[-2000:]
        history = read_reconfigurations(reconf)
        assert history[: len(done_before)] == done_before
        placements = [tuple(sorted(r["nodes"])) for r in history]
        assert all(a != b for a, b in zip(placements, placements[1:], strict=False)), history
        for r in history:  # every node added was not hosting a replica already
            prior = set(r["nodes"]) - set(r["added"])
            assert not set(r["added"]) & prior
    finally:
        for p in (ctl, producer):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)
        tb.close()
    assert _leftovers(range(15300, 15303)) == []
