"""Reconfiguration cost on the local testbed: the same scale-up and scale-down, `live` and then `restart`.

One testbed (embedded broker, 2 budgeted fog nodes, the Spark job) under a constant input; the local backend
adds fog2 and removes it again, first live (executors added/removed while the query runs), then by restart
(stop at the checkpoint, change workers, start again). Each pause is measured as the longest gap between
completed micro-batches around the change. Prints the pauses, the live/restart ratio (target: <= 0.2), and
the exactly-once accounting by unique keys over the whole run.

A live scale-up has the driver run its warm-up job on the new executor (jobs/warm.py) unless `--no-warm`.

    .venv/bin/python benchmarks/bench_reconfig.py [--rate 100] [--node-cpu 0.5] [--no-warm] [--out out/bench-reconfig]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gesscale.latency_map import load_latency_map  # noqa: E402
from gesscale.observation import Placement  # noqa: E402
from gesscale.testbed import DEFAULT_MAP, Testbed, TestbedConfig  # noqa: E402
from gesscale.testbed.backend import LocalBackend  # noqa: E402
from gesscale.testbed.fleet import FleetPorts  # noqa: E402
from gesscale.testbed.job import JobSettings  # noqa: E402
from gesscale.testbed.keys import account  # noqa: E402


def wait_batches(backend: LocalBackend, count: int, timeout_s: float = 300.0) -> None:
    """Block until `count` more micro-batches completed."""
    backend.log.poll()
    target = len(backend.log.batches) + count
    deadline = time.monotonic() + timeout_s
    while len(backend.log.batches) < target:
        if time.monotonic() > deadline:
            raise SystemExit(f"no progress: fewer than {count} batches in {timeout_s:.0f} s")
        time.sleep(0.5)
        backend.log.poll()


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=100.0, help="input records/s (constant; below one node's "
                    "capacity, so batches keep completing and the backlog drains)")
    ap.add_argument("--node-cpu", type=float, default=0.5, help="CPU budget per fog node (cores)")
    ap.add_argument("--no-warm", action="store_true", help="live scale-up without the driver's warm-up job "
                    "(jobs/warm.py), to see what it saves")
    ap.add_argument("--out", type=Path, default=Path("out/bench-reconfig"), help="run folder")
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    lmap = load_latency_map(DEFAULT_MAP).subset(["fog1", "fog2"])
    cfg = TestbedConfig(run_dir=args.out, nodes=["fog1", "fog2"], node_cpu=args.node_cpu, kafka_port=15293,
                        ports=FleetPorts(master=15277, master_ui=15278, worker_base=15500, worker_ui_base=15600),
                        job=JobSettings(bootstrap="", http_port=15280, ui_port=15240))
    t0 = time.monotonic()
    tb = Testbed.up(cfg)
    producer = None
    pauses: dict[str, dict[str, float]] = {}
    try:
        producer = subprocess.Popen(
            [sys.executable, "-m", "gesscale", "produce", "--rate", str(args.rate), "--duration", "3600",
             "--kafka", tb.job.settings.bootstrap, "--topic", "rides", "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        backend = LocalBackend(tb.fleet, tb.job, lmap, strategy="live", warm=not args.no_warm)
        print(f"testbed up in {time.monotonic() - t0:.0f} s; waiting for the job to be warm", flush=True)
        wait_batches(backend, 4)
        for strategy in ("live", "restart"):
            backend.strategy = strategy
            up = backend.apply(Placement(("fog1", "fog2"), lmap.nd_max(["fog1", "fog2"])))
            wait_batches(backend, 4)
            down = backend.apply(Placement(("fog1",), 0.0))
            wait_batches(backend, 4)
            pauses[strategy] = {"up": up, "down": down}
            took = [r.took_s for r in backend.reconfigurations[-2:]]
            print(f"{strategy:8s} scale-up pause {up:6.1f} s (change took {took[0]:.1f} s), "
                  f"scale-down pause {down:6.1f} s (took {took[1]:.1f} s)", flush=True)
        live, restart = pauses["live"], pauses["restart"]
        for kind in ("up", "down"):
            print(f"pause ratio live/restart, scale-{kind}: {live[kind]:.1f} / {restart[kind]:.1f} = "
                  f"{live[kind] / restart[kind]:.2f}")
        total = (live["up"] + live["down"]) / (restart["up"] + restart["down"])
        print(f"pause ratio live/restart, both: {total:.2f} (target <= 0.20)", flush=True)
        os.kill(producer.pid, signal.SIGINT)
        producer.wait(60)
        _drain(backend)
        tb.job.stop()
        acc = account(tb.job.settings.bootstrap, "rides", tb.job.settings.output, tb.job.settings.dead_letter)
    finally:
        if producer is not None and producer.poll() is None:
            os.killpg(producer.pid, signal.SIGKILL)
        tb.close()
    print(f"records produced {acc.produced}, processed {acc.processed}, lost {acc.lost}, "
          f"duplicated {acc.duplicated} (both strategies, one run); wall time {time.monotonic() - t0:.0f} s")


def _drain(backend: LocalBackend, timeout_s: float = 1200.0) -> None:
    """Wait until the job has processed everything in the input topic."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        backend.log.poll()
        if backend._input_end() - backend.log.processed <= 0:
            return
        time.sleep(1.0)
    raise SystemExit("the backlog did not drain")


if __name__ == "__main__":
    main()
