"""The userspace WAN engine's fidelity and cost, measured in one run on loopback addresses only.

One delay daemon (netem.userspace) holds the UDP packets 127.0.0.61 -> 127.0.0.62 for a configured one-way delay
(one tagged NFQUEUE rule, as `gesscale netem apply` makes them). A sender in its own process stamps each packet
with its sequence number and send time; the receiver takes the kernel's receive timestamp of each datagram
(SO_TIMESTAMPNS, same clock), so its own speed does not count. Printed, per offered rate (2 s each):

1. the delivered delay's error against the configured value (median, p95), with the loopback path's own delay
   (measured first, without the rule) subtracted; target at ~1 000 packets/s: |median| <= 0.5 ms + 2 %;
2. the packet capacity: the highest rate reached with the added error's median <= 1 ms and no packet lost
   (rates are stepped up until that fails); target >= 20 000 packets/s;
3. packets the kernel dropped for the queue, packets received out of order, and the CPU (% of one core) of the
   daemon, the sender and the receiver.

    .venv/bin/python benchmarks/bench_netem.py [--delay-ms 20] [--seconds 2] [--rates 1000,5000,...]
        [--daemon-src DIR]   # run the daemon of another checkout (before/after: `git archive OLD netem | tar -x`)

Run as root (iptables, NFQUEUE). Bounded: about (2 + number of rates) x (--seconds + 0.5) s. Everything it
adds (rule, daemon, temp dir) is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from netem.userspace.agent import QUEUE_PROC, bound_queues  # noqa: E402
from netem.userspace.launch import daemon_argv  # noqa: E402

SRC, DST, PORT = "127.0.0.61", "127.0.0.62", 47_911
LABEL = "gesscale-netem:bench:a"
QUEUE = 4095
RULE = ["OUTPUT", "-s", f"{SRC}/32", "-d", f"{DST}/32", "-p", "udp", "-m", "comment", "--comment", LABEL,
        "-j", "NFQUEUE", "--queue-num", str(QUEUE)]  # fmt: skip
STAMP = struct.Struct("!Qd")  # sequence number, send time (CLOCK_REALTIME, s)
TIMESPEC = struct.Struct("=qq")  # struct timespec of SCM_TIMESTAMPNS (64-bit Linux)
SO_TIMESTAMPNS = 35  # asm-generic/socket.h; the kernel's receive time of each datagram, in ancillary data
SO_SNDBUFFORCE = 32  # root: a send buffer beyond wmem_max
SO_RCVBUFFORCE = 33  # root: a receive buffer beyond rmem_max, so the receiver never drops


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _queue_drops(queue: int) -> int:
    """Packets the kernel dropped for this queue (queue full, or the daemon's socket buffer overrun)."""
    for line in QUEUE_PROC.read_text().splitlines():
        f = line.split()
        if f and f[0] == str(queue):
            return int(f[5]) + int(f[6])  # queue_dropped, queue_user_dropped
    return 0


def _send(rate: int, seconds: float, out: Connection) -> None:
    """In a child process (its own CPU, no GIL shared with the receiver): `rate` packets/s in 1 ms bursts, each
    stamped with its sequence number and CLOCK_REALTIME just before it is sent."""
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Held packets stay charged to the sending socket: with the default send buffer, ~200 of them in flight (about
    # 8 000 packets/s at 20 ms) block the sender, which would cap what is offered, not what the daemon can carry.
    try:
        tx.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
    except OSError:
        tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    tx.bind((SRC, 0))
    tx.connect((DST, PORT))
    total, tick = int(rate * seconds), 0.001
    t0 = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - t0) * rate) + 1)  # by the clock: a late wake-up sends more
        while sent < due:
            tx.send(STAMP.pack(sent, time.time()))
            sent += 1
        time.sleep(tick)
    out.send((total, time.monotonic() - t0, time.process_time()))
    tx.close()


def run_rate(rate: int, seconds: float, wait_s: float) -> dict[str, float]:
    """Send `rate` packets/s for `seconds`; delivered one-way delays (ms: the kernel's receive timestamp minus the
    sender's stamp, both CLOCK_REALTIME, so a slow receiver does not add to them), arrivals, order."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    except OSError:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    rx.bind((DST, PORT))
    rx.settimeout(wait_s)
    delays: list[float] = []
    seen: set[int] = set()
    reordered = 0
    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe(duplex=False)
    sender = ctx.Process(target=_send, args=(rate, seconds, theirs), daemon=True)
    sender.start()
    cpu0, wall0 = time.process_time(), time.monotonic()
    last_seq = -1
    while True:
        try:
            data, anc, _, _ = rx.recvmsg(64, 64)
        except TimeoutError:
            if sender.is_alive():
                continue
            break  # the sender is done and nothing came for wait_s: all that was going to arrive has
        seq, sent_at = STAMP.unpack_from(data)
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = TIMESPEC.unpack_from(value)
                delays.append((sec + nsec * 1e-9 - sent_at) * 1000.0)
        seen.add(seq)
        reordered += seq < last_seq
        last_seq = max(last_seq, seq)
    rx_cpu = time.process_time() - cpu0
    total, elapsed, tx_cpu = mine.recv()
    sender.join()
    rx.close()
    ordered = sorted(delays)
    return {"rate": rate, "achieved_rate": round(total / elapsed), "sent": total, "received": len(seen),
            "reordered": reordered, "tx_cpu_pct": 100.0 * tx_cpu / elapsed,
            "rx_cpu_pct": 100.0 * rx_cpu / (time.monotonic() - wall0),
            "median_ms": statistics.median(ordered) if ordered else float("nan"),
            "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] if ordered else float("nan")}  # fmt: skip


def main() -> int:
    """Measure and print; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rates", default="1000,5000,10000,15000,20000,25000,30000,40000")
    ap.add_argument("--daemon-src", type=Path, default=ROOT,
                    help="checkout whose netem.userspace daemon runs (e.g. an older commit, for before/after)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_netem needs root (iptables, NFQUEUE)", file=sys.stderr)
        return 2
    if not (args.daemon_src / "netem" / "userspace" / "__main__.py").is_file():
        print(f"--daemon-src {args.daemon_src}: no netem/userspace/__main__.py there", file=sys.stderr)
        return 2
    if QUEUE in bound_queues():
        print(f"NFQUEUE {QUEUE} is in use", file=sys.stderr)
        return 2
    try:
        rates = [int(r) for r in args.rates.split(",")]
    except ValueError:
        print(f"--rates {args.rates!r}: comma-separated integers expected", file=sys.stderr)
        return 2
    wait_s = args.delay_ms / 1000.0 + 0.3
    base = run_rate(1000, args.seconds, wait_s)  # the loopback path and this program, without the daemon
    state = Path(tempfile.mkdtemp(prefix="gesscale-bench-netem-"))
    config = state / "links.json"
    config.write_text(json.dumps({"queue": QUEUE, "links": {"1": {"src": "a", "dst": "b", "delay_ms": args.delay_ms,
                                  "src_addr": SRC, "dst_addr": DST}}}))  # fmt: skip
    log = (state / "daemon.log").open("wb")
    daemon = subprocess.Popen([sys.executable, *daemon_argv(config, LABEL)], stdout=log, stderr=subprocess.STDOUT,
                              cwd=args.daemon_src, start_new_session=True)  # fmt: skip
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
            cpu0, w0, drops0 = _cpu_s(daemon.pid), time.monotonic(), _queue_drops(QUEUE)
            row = run_rate(rate, args.seconds, wait_s)
            row["cpu_pct"] = 100.0 * (_cpu_s(daemon.pid) - cpu0) / (time.monotonic() - w0)
            row["kernel_drops"] = _queue_drops(QUEUE) - drops0
            row["error_ms"] = row["median_ms"] - args.delay_ms - base["median_ms"]
            row["p95_error_ms"] = row["p95_ms"] - args.delay_ms - base["median_ms"]
            row["ok"] = row["received"] == row["sent"] and row["error_ms"] <= 1.0
            rows.append(row)
            if not row["ok"]:
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

    print(f"daemon from {args.daemon_src}; configured one-way delay {args.delay_ms:g} ms; loopback path alone: "
          f"median {base['median_ms']:.3f} ms at {base['achieved_rate']} packets/s")
    print(f"{'offered':>8} {'sent/s':>7} {'sent':>7} {'lost':>6} {'qdrop':>6} {'reord':>6} {'median':>8} {'error':>7} "
          f"{'p95 err':>8} {'cpu%':>6} {'tx cpu%':>7} {'rx cpu%':>7}")
    for r in rows:
        print(f"{r['rate']:>8} {r['achieved_rate']:>7} {r['sent']:>7} {r['sent'] - r['received']:>6} "
              f"{r['kernel_drops']:>6} {r['reordered']:>6} {r['median_ms']:>8.3f} {r['error_ms']:>+7.3f} "
              f"{r['p95_error_ms']:>+8.3f} {r['cpu_pct']:>6.1f} {r['tx_cpu_pct']:>7.1f} {r['rx_cpu_pct']:>7.1f}")
    first = rows[0] if rows else None
    if first:
        limit = 0.5 + 0.02 * args.delay_ms
        verdict = "meets" if abs(first["error_ms"]) <= limit else "misses"
        print(f"delay error at {first['achieved_rate']} packets/s: median {first['error_ms']:+.3f} ms "
              f"({verdict} the target of {limit:.2f} ms); daemon CPU {first['cpu_pct']:.1f} % of a core")
    ok = [r for r in rows if r["ok"]]
    cap = max((r["achieved_rate"] for r in ok), default=0)
    print(f"capacity: {cap} packets/s with added error <= 1 ms and no packet lost (target >= 20000)"
          + ("" if len(ok) < len(rows) else " (highest rate tried; the limit is above it)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
