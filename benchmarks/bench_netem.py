"""The userspace WAN engine's fidelity and cost, measured in one run on loopback addresses only.

One delay daemon (netem.userspace) holds the UDP packets 127.0.0.61 -> 127.0.0.62 for a configured one-way delay
(one tagged NFQUEUE rule, as `gesscale netem apply` makes them). A sender stamps each packet with its send time;
a receiver on the same machine (same monotonic clock) computes the delivered one-way delay. Printed:

1. the delivered delay's error against the configured value (median, p95) at ~1 000 packets/s, with the loopback
   path's own delay (measured first, without the rule) subtracted; target: |median| <= 0.5 ms + 2 %;
2. the packet capacity: rates stepped up until the added error (median) exceeds 1 ms or packets go missing;
   target >= 20 000 packets/s;
3. the daemon's CPU (% of one core, from /proc/PID/stat) at each rate.

    .venv/bin/python benchmarks/bench_netem.py [--delay-ms 20] [--seconds 2] [--rates 1000,5000,10000,20000,30000]

Run as root (iptables, NFQUEUE). Bounded: about (2 + number of rates) x --seconds + a few seconds. Everything it
adds (rule, daemon, temp dir) is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from netem.userspace.agent import bound_queues  # noqa: E402
from netem.userspace.launch import daemon_argv  # noqa: E402

SRC, DST, PORT = "127.0.0.61", "127.0.0.62", 47_911
LABEL = "gesscale-netem:bench:a"
QUEUE = 4095
RULE = ["OUTPUT", "-s", f"{SRC}/32", "-d", f"{DST}/32", "-p", "udp", "-m", "comment", "--comment", LABEL,
        "-j", "NFQUEUE", "--queue-num", str(QUEUE)]  # fmt: skip
STAMP = struct.Struct("!Qd")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_rate(rate: int, seconds: float) -> dict[str, float]:
    """Send `rate` packets/s for `seconds`; delivered one-way delays (ms) and how many arrived."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind((DST, PORT))
    rx.settimeout(0.2)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((SRC, 0))
    delays: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while True:
            try:
                data = rx.recv(64)
            except TimeoutError:
                if done.is_set():
                    return
                continue
            now = time.monotonic()
            _, sent = STAMP.unpack_from(data)
            delays.append((now - sent) * 1000.0)

    reader = threading.Thread(target=receive)
    reader.start()
    total = int(rate * seconds)
    tick = 0.001
    per_tick = rate * tick
    t0 = time.monotonic()
    sent = 0
    while sent < total:
        due = int((time.monotonic() - t0) / tick * per_tick) + 1
        while sent < min(due, total):
            tx.sendto(STAMP.pack(sent, time.monotonic()), (DST, PORT))
            sent += 1
        pause = t0 + (sent / rate) - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)
    done.set()
    reader.join()
    rx.close()
    tx.close()
    ordered = sorted(delays)
    return {"rate": rate, "achieved_rate": round(total / elapsed), "sent": total, "received": len(delays),
            "median_ms": statistics.median(ordered) if ordered else float("nan"),
            "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] if ordered else float("nan")}  # fmt: skip


def main() -> int:
    """Measure and print; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rates", default="1000,5000,10000,20000,30000,40000")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_netem needs root (iptables, NFQUEUE)", file=sys.stderr)
        return 2
    if QUEUE in bound_queues():
        print(f"NFQUEUE {QUEUE} is in use", file=sys.stderr)
        return 2
    rates = [int(r) for r in args.rates.split(",")]
    base = run_rate(1000, args.seconds)  # the loopback path and this program, without the daemon
    state = Path(tempfile.mkdtemp(prefix="gesscale-bench-netem-"))
    config = state / "links.json"
    config.write_text(json.dumps({"queue": QUEUE, "links": {"1": {"src": "a", "dst": "b", "delay_ms": args.delay_ms,
                                  "src_addr": SRC, "dst_addr": DST}}}))  # fmt: skip
    log = (state / "daemon.log").open("wb")
    daemon = subprocess.Popen([sys.executable, *daemon_argv(config, LABEL)], stdout=log, stderr=subprocess.STDOUT,
                              cwd=ROOT, start_new_session=True)  # fmt: skip
    rows = []
    try:
        deadline = time.monotonic() + 10
        while QUEUE not in bound_queues():
            if daemon.poll() is not None or time.monotonic() > deadline:
                print((state / "daemon.log").read_text(), file=sys.stderr)
                return 1
            time.sleep(0.05)
        subprocess.run(["iptables", "-w", "5", "-t", "mangle", "-A", *RULE], check=True)
        for rate in rates:
            cpu0, w0 = _cpu_s(daemon.pid), time.monotonic()
            row = run_rate(rate, args.seconds)
            row["cpu_pct"] = 100.0 * (_cpu_s(daemon.pid) - cpu0) / (time.monotonic() - w0)
            row["error_ms"] = row["median_ms"] - args.delay_ms - base["median_ms"]
            row["p95_error_ms"] = row["p95_ms"] - args.delay_ms - base["median_ms"]
            rows.append(row)
            if row["received"] < 0.99 * row["sent"] or row["error_ms"] > 1.0:
                break  # past capacity: higher rates only take longer
    finally:
        subprocess.run(["iptables", "-w", "5", "-t", "mangle", "-D", *RULE], capture_output=True)
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()
        log.close()
        for f in state.iterdir():
            f.unlink()
        state.rmdir()

    print(f"configured one-way delay {args.delay_ms:g} ms; loopback path alone: median {base['median_ms']:.3f} ms "
          f"at {base['achieved_rate']} packets/s")
    print(f"{'rate/s':>8} {'sent':>7} {'lost':>6} {'median':>8} {'error':>7} {'p95 err':>8} {'cpu%':>6}")
    for r in rows:
        print(f"{r['achieved_rate']:>8} {r['sent']:>7} {r['sent'] - r['received']:>6} {r['median_ms']:>8.3f} "
              f"{r['error_ms']:>+7.3f} {r['p95_error_ms']:>+8.3f} {r['cpu_pct']:>6.1f}")
    first = rows[0] if rows else None
    if first:
        limit = 0.5 + 0.02 * args.delay_ms
        verdict = "meets" if abs(first["error_ms"]) <= limit else "misses"
        print(f"delay error at {first['achieved_rate']} packets/s: median {first['error_ms']:+.3f} ms "
              f"({verdict} the target of {limit:.2f} ms)")
    ok = [r for r in rows if r["received"] >= 0.99 * r["sent"] and r["error_ms"] <= 1.0]
    cap = max((r["achieved_rate"] for r in ok), default=0)
    print(f"capacity: {cap} packets/s with added error <= 1 ms and < 1 % missing (target >= 20000)"
          + ("" if len(ok) < len(rows) else " (highest rate tried; the limit is above it)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
