"""The capacity probe's target on the local testbed: the real Spark job, its fog nodes, a paced injector.

`LocalProbeTarget` implements `gesscale.probe.ProbeTarget`:

- `configure(nodes)` makes the job's executors run on exactly those fog nodes (the `live` strategy of the local
  backend: workers started and stopped, executors added and killed through the job's hook), waits until the
  backlog is drained, then sends one micro-batch of records and waits for it, so every executor's Python
  workers are started before anything is measured;
- `inject(rate, seconds)` sends ride records at `rate` records/s into the input topic (unique keys
  `probe<tag>x<seq>-0`, so exactly-once stays checkable) and reports each second's processed records and
  backlog; `inject(0, s)` is the cool-down: no input until the backlog is drained (at most `s` seconds);
- `upper_bound(nodes)` measures the throughput while the job drains a burst of several full micro-batches
  (admission control binding on every batch: the operator saturated, which is what Gesscale reads as MST under
  back pressure) and returns it plus a headroom (`headroom`, 30%).

Micro-batches are coarse (seconds each), so per-second figures are derived: each batch's rows are spread
evenly over its duration (from its start, `time - batch_duration_ms`, to its completion `time`); the processed
count of a second is what the batches running in it did, and the backlog at the end of a second is the input
topic's end offsets minus the records processed so far in that sense. At a sustained rate that backlog stays
flat (about one batch's worth of input: the batch running plus what arrives meanwhile), under overload it grows
by the excess. To know the batches running at the end of a window, `inject` waits (still injecting) for the
first batch completed after it.

Success, live (`LIVE_PARAMS`): a batch boundary falling just inside or just outside a window moves the
window's processed count and backlog by up to one batch of input, several seconds' worth, so the simulator's
1% / 0.1% criterion would read noise as overload. The live criterion keeps its form (processed within
`tolerance` of the injected rate, backlog trend over the observation at most `backlog_tolerance` of what was
injected) with both set to 5%: over a 20 s observation phase, 5% of the input is one second of it, about what
the timing of a batch boundary moves. A rate more than ~5% above the MST fails; the measured MST is therefore
within about `precision` + 5% below the true one. See docs/calibration.md.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gesscale.backends.local import LocalBackend
from gesscale.errors import UserError
from gesscale.observation import Placement
from gesscale.probe import ProbeParams, Window

log = logging.getLogger(__name__)

LIVE_PARAMS = ProbeParams(
    warmup_s=0.0,  # the upper bound's burst is the warm-up at full rate (see `upper_bound`)
    cooldown_s=60.0,  # at most: the live cool-down ends as soon as the backlog is drained
    inject_s=10.0,
    observe_s=20.0,
    tolerance=0.05,
    backlog_tolerance=0.05,
    precision=0.1,
    max_steps=4,
)


# -- per-second figures from micro-batches (pure) -----------------------------------------------------------
def distinct_batches(batches: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first record of each batch id (a batch replayed after a restart processed nothing new)."""
    seen: set[int] = set()
    out = []
    for b in batches:
        if b["batch_id"] not in seen:
            seen.add(b["batch_id"])
            out.append(b)
    return out


def processed_by(batches: Sequence[dict[str, Any]], t: float) -> float:
    """Records processed by time `t`, each batch's rows spread evenly over its duration."""
    done = 0.0
    for b in batches:
        end = float(b["time"])
        rows = float(b["num_input_rows"])
        start = end - float(b["batch_duration_ms"]) / 1000.0
        if t >= end:
            done += rows
        elif t > start:
            done += rows * (t - start) / (end - start)
    return done


def window_from_samples(batches: Sequence[dict[str, Any]], t0: float, ends: Sequence[tuple[float, float]]) -> Window:
    """Per-second processed records and backlog of a window that started at `t0`.

    `ends` holds (time, Σ end offsets of the input topic) sampled at the end of each second; `batches` must
    include every batch running during the window (see the module docstring).
    """
    bs = distinct_batches(batches)
    processed, backlog = [], []
    before = processed_by(bs, t0)
    for t, end in ends:
        now = processed_by(bs, t)
        processed.append(now - before)
        backlog.append(max(0.0, end - now))
        before = now
    return Window(processed, backlog)


def saturated_rate(batches: Sequence[dict[str, Any]]) -> float | None:
    """Throughput over the held-back batches of a drained burst: rows of the 2nd..last held-back batch over the
    time from the completion of the 1st to that of the last (whole batches only); None with fewer than 3."""
    held = [b for b in distinct_batches(batches) if b.get("held_back") and b["num_input_rows"] > 0]
    if len(held) < 3:
        return None
    span = float(held[-1]["time"]) - float(held[0]["time"])
    rows = sum(int(b["num_input_rows"]) for b in held[1:])
    return rows / span if span > 0 else None


# -- the injector ------------------------------------------------------------------------------------------
class Injector:
    """A thread that sends ride records into the input topic at a set rate (records/s), through the
    producer's Kafka sink (acks=all, failed records re-sent). Each record gets its own ride id, so every key is
    unique."""

    def __init__(self, bootstrap: str, topic: str, tag: str | None = None, pool: int = 2000) -> None:
        from producer.sinks import KafkaSink
        from producer.source import synthetic_source

        self.sink = KafkaSink(bootstrap, topic, lambda msg: log.info("injector: %s", msg))
        self.tag = tag or secrets.token_hex(3)
        self._rides = [r for _, r in zip(range(pool), synthetic_source(None, 500_000, seed=7), strict=False)]
        self.sent = 0
        self._rate = 0.0
        self._base_t = time.monotonic()
        self._base_sent = 0
        self._burst = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gesscale-probe-injector", daemon=True)
        self._thread.start()

    def set_rate(self, rate: float) -> None:
        """Send `rate` records/s from now on (0 stops)."""
        with self._lock:
            self._rate = max(0.0, float(rate))
            self._base_t = time.monotonic()
            self._base_sent = self.sent

    def burst(self, count: int) -> None:
        """Send `count` more records as fast as possible (on top of the rate)."""
        with self._lock:
            self._burst += int(count)

    def _record(self) -> tuple[bytes, bytes]:
        from producer.records import RideEncoder

        ride = self._rides[self.sent % len(self._rides)]
        enc = RideEncoder(replace(ride, ride_id=f"probe{self.tag}x{self.sent}"))
        return enc.key_bytes, enc.value(0)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    due = int(self._rate * (time.monotonic() - self._base_t)) - (self.sent - self._base_sent)
                    extra, self._burst = min(self._burst, 5000), max(0, self._burst - 5000)
                    self._base_sent += extra  # burst records do not count against the rate
                for _ in range(max(0, min(due, 5000)) + extra):
                    self.sink.send(*self._record())
                    self.sent += 1
                self.sink.service()
                self._stop.wait(0.005)
        except BaseException as err:  # noqa: BLE001 - reported to the caller by `check`
            self.error = err

    def check(self) -> None:
        """Re-raise a failure of the sending thread."""
        if self.error is not None:
            raise UserError(f"the probe's injector failed: {self.error}") from self.error

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until everything sent so far is acknowledged (called with the rate at 0)."""
        deadline = time.monotonic() + timeout_s
        while self.sink.pending() and time.monotonic() < deadline:
            self.check()
            time.sleep(0.05)

    def close(self) -> None:
        """Stop the thread, deliver what was sent, release the client."""
        self.set_rate(0)
        self._stop.set()
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self.sink.drain(10)
        self.sink.close()


# -- the target --------------------------------------------------------------------------------------------
class LocalProbeTarget:
    """`ProbeTarget` on the local testbed's job (see the module docstring)."""

    def __init__(self, backend: LocalBackend, *, headroom: float = 0.3, burst_batches: int = 5,
                 settle_timeout_s: float = 240.0, say: Callable[[str], None] | None = None) -> None:
        from kafka import KafkaConsumer

        self.backend = backend
        self.job = backend.job
        self.headroom = headroom
        self.burst_batches = burst_batches
        self.settle_timeout_s = settle_timeout_s
        self.say = say or (lambda s: None)
        s = self.job.settings
        self.injector = Injector(s.bootstrap, s.input)
        self._consumer = KafkaConsumer(bootstrap_servers=s.bootstrap, enable_auto_commit=False, group_id=None)
        self._tps: list[Any] = []
        self.saturated: dict[tuple[str, ...], float] = {}

    # -- helpers ------------------------------------------------------------------------------------------
    def input_end(self) -> int:
        """Σ end offsets of the input topic."""
        from kafka import TopicPartition

        topic = self.job.settings.input
        if not self._tps:
            self._tps = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic) or ())]
        return sum(int(o) for o in self._consumer.end_offsets(self._tps).values())

    def _batches(self) -> list[dict[str, Any]]:
        self.backend.log.poll()
        return self.backend.log.batches

    def backlog(self) -> int:
        """Records in the input topic that no completed micro-batch has processed."""
        end = self.input_end()
        self.backend.log.poll()
        return max(0, end - self.backend.log.processed)

    def _alive(self) -> None:
        self.injector.check()
        if not self.job.alive():
            raise UserError(f"the job exited; see {self.job.log_path}: {self.job.log_tail()}")

    def drain(self, timeout_s: float) -> bool:
        """Stop injecting and wait until every record sent is processed; False after `timeout_s`."""
        self.injector.set_rate(0)
        self.injector.flush()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._alive()
            if self.backlog() == 0:
                return True
            time.sleep(0.25)
        return self.backlog() == 0

    def _wait_batch_after(self, t: float, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._alive()
            if any(float(b["time"]) >= t for b in self._batches()):
                return
            time.sleep(0.2)
        raise UserError(f"the job completed no micro-batch within {timeout_s:.0f} s; see {self.job.log_path}")

    # -- ProbeTarget --------------------------------------------------------------------------------------
    def configure(self, nodes: tuple[str, ...]) -> None:
        """Executors on exactly `nodes`, backlog drained, one micro-batch run on the new executors."""
        if not self.drain(self.settle_timeout_s):
            raise UserError(f"the backlog did not drain within {self.settle_timeout_s:.0f} s")
        lmap = self.backend.latency_map
        self.backend.apply(Placement(tuple(nodes), lmap.nd_max(nodes)))
        have = set(self.backend.current().nodes)
        if have != set(nodes):
            raise UserError(f"executors run on {sorted(have)}, not on {sorted(nodes)}")
        t = time.time()
        self.injector.burst(self.job.settings.max_rows_per_batch)
        self._wait_batch_after(t, self.settle_timeout_s)
        if not self.drain(self.settle_timeout_s):
            raise UserError(f"the backlog did not drain within {self.settle_timeout_s:.0f} s")

    def upper_bound(self, nodes: tuple[str, ...]) -> float:
        """Saturated throughput while draining a burst of `burst_batches` full batches, plus `headroom`."""
        t = time.time()
        self.injector.burst(self.burst_batches * self.job.settings.max_rows_per_batch)
        if not self.drain(self.settle_timeout_s):
            raise UserError(f"the burst did not drain within {self.settle_timeout_s:.0f} s")
        rate = saturated_rate([b for b in self._batches() if float(b["time"]) > t])
        if rate is None:
            raise UserError("the burst was processed in fewer than 3 held-back micro-batches; cannot measure "
                            "the saturated throughput (is max_rows_per_batch set?)")
        self.saturated[tuple(nodes)] = rate
        self.say(f"    saturated throughput {rate:.0f}/s: searching up to {rate * (1 + self.headroom):.0f}/s")
        return rate * (1 + self.headroom)

    def inject(self, rate: float, seconds: float) -> Window:
        """Inject `rate` records/s for `seconds` and report each second; rate 0 is a cool-down until drained."""
        t0 = time.time()
        if rate <= 0:
            self.drain(seconds)
            batches = self._batches()
            n = int(round(time.time() - t0))
            end = self.input_end()
            return window_from_samples(batches, t0, [(t0 + i + 1, end) for i in range(n)])
        self.injector.set_rate(rate)
        ends: list[tuple[float, float]] = []
        for i in range(int(round(seconds))):
            left = t0 + i + 1 - time.time()
            if left > 0:
                time.sleep(left)
            self._alive()
            ends.append((time.time(), float(self.input_end())))
        if ends:
            self._wait_batch_after(ends[-1][0], self.settle_timeout_s)  # still injecting at `rate`
        window = window_from_samples(self._batches(), t0, ends)
        if ends:
            sent = (ends[-1][1] - ends[0][1]) / max(ends[-1][0] - ends[0][0], 1e-6)
            if sent < rate * 0.97 and len(ends) > 2:
                log.warning("the injector reached %.0f of %.0f records/s", sent, rate)
        return window

    def close(self) -> None:
        """Stop injecting and release the clients (the testbed is torn down by its owner)."""
        self.injector.close()
        with contextlib.suppress(Exception):
            self._consumer.close()
