"""End to end on the real testbed: a shortened live demo (exactly once by unique keys, at least one
reconfiguration, every day record's latency above the emulated RTT to the node that processed it, nothing left
behind). The controller killed -9 mid-run is in tests/faults/test_controller.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from gesscale.testbed.cgroups import PREFIX

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
    opts = DemoOptions(out=tmp_path / "demo", nodes=3, node_cpu=0.25, day_s=90, peak_load=1.5,
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
    _check_latency(report)
    assert _leftovers(range(15450, 15450 + opts.nodes)) == []


def _check_latency(report: dict) -> None:
    """One latency per day record, from broker append times, per period and per run; none below the physical
    floor: the emulated RTT between the site and the nearest node of the executors of the batch that read it."""
    from gesscale.latency_map import load_latency_map
    from gesscale.testbed import DEFAULT_MAP
    from gesscale.testbed.latency import floor_violations, read_records_csv

    lat = report["latency"]
    print(f"latency: {lat}", flush=True)
    assert lat["broker_append_times"], lat["timestamps"]
    assert lat["basis"] == "output append"
    # every record the producer sent in the day has its latency, and they are all the records processed after
    # the warm-up and the probe
    assert lat["records"] == lat["processed"] == report["producer"]["acked"]
    assert lat["processed"] == report["processed"] - lat["excluded_before_day"]
    assert lat["unprocessed"] == 0 and lat["max_s"] is not None
    assert lat["p50_s"] <= lat["p95_s"] <= lat["p99_s"] <= lat["max_s"]
    periods = [p["latency"] for p in report["periods"]]
    assert sum(p["records"] for p in periods) == lat["records"]
    assert all(set(p) >= {"p50_s", "p95_s", "p99_s", "max_s"} for p in periods)
    rows = read_records_csv(Path(lat["records_csv"]))
    assert len(rows) == lat["records"]
    lmap = load_latency_map(DEFAULT_MAP)
    site = report["network"]["site"]
    floors = {n: lmap.rtt(site, n) for n in lmap.names if n != site}
    assert all(r["nodes"] for r in rows)  # every record was read by a committed batch with known executors
    bad = floor_violations(rows, lambda n: floors.get(n, 0.0))
    assert bad == [], bad[:5]
    lowest = min(r["latency_ms"] - min(floors.get(n, 0.0) for n in r["nodes"].split("+")) for r in rows)
    print(f"closest to the floor: {lowest:.1f} ms above the RTT; nodes seen "
          f"{sorted({r['nodes'] for r in rows})}; RTT to the site {floors}", flush=True)
    assert set(report["simulated_latency"]) == {"gesscale", "ideal"}
