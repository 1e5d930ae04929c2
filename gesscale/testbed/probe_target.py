"""The capacity probe's target on the local testbed: the real Spark job, its fog nodes, a paced injector.

`LocalProbeTarget` implements `gesscale.probe.ProbeTarget`:

- `configure(nodes)` makes the job's executors run on exactly those fog nodes (the `live` strategy of the local
  backend: workers started and stopped, executors added and killed through the job's hook) with the backlog
  drained;
- `inject(rate, seconds)` sends ride records at `rate` records/s into the input topic (unique keys
  `probe<tag>x<seq>-0`, so exactly-once stays checkable) and reports each second's processed records and
  backlog; `inject(0, s)` is the cool-down: no input until the backlog is drained (at most `s` seconds);
- `upper_bound(nodes)` measures the throughput S while the job drains a burst of several full micro-batches
  (admission control binding on every batch: the operator saturated, which is what Gesscale reads as MST under
  back pressure) and returns S plus a headroom (`headroom`, 30%); `expected_mst(nodes)` offers S as the
  search's starting point (the search's result is only ever a rate observed sustained).

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
injected) with both set to 5%: over a 15 s observation phase, 5% of the input is under a second of it, less
than what the timing of one batch boundary moves. The price, stated: a rate up to ~5% above the MST can pass,
and the search stops within `precision` below the answer, so a live measurement lies within roughly
-`precision` .. +5% of the MST (more on a machine whose load changes during the run). See docs/calibration.md.
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

from gesscale.batch_record import BatchRecord
from gesscale.errors import UserError
from gesscale.observation import Placement
from gesscale.probe import ProbeParams, Window, injector_fell_short
from gesscale.testbed.backend import LocalBackend

log = logging.getLogger(__name__)

LIVE_PARAMS = ProbeParams(
    warmup_s=0.0,  # the upper bound's burst is the warm-up at full rate (see `upper_bound`)
    cooldown_s=30.0,  # at most: the live cool-down ends as soon as the backlog is drained
    inject_s=5.0,  # about one micro-batch: batch sizes settle within one or two at a sustained rate
    observe_s=15.0,  # three or four micro-batches of ~4-5 s (0.25 core per node)
    tolerance=0.05,
    backlog_tolerance=0.05,
    precision=0.15,
    max_steps=3,  # from the saturated throughput S: S, then S +- 15%, then +- 7.5%
)


# -- per-second figures from micro-batches (pure) -----------------------------------------------------------
def distinct_batches(batches: Sequence[BatchRecord]) -> list[BatchRecord]:
    """The first record of each batch id (a batch replayed after a restart processed nothing new)."""
    seen: set[int] = set()
    out = []
    for b in batches:
        if b.batch_id not in seen:
            seen.add(b.batch_id)
            out.append(b)
    return out


def processed_by(batches: Sequence[BatchRecord], t: float) -> float:
    """Records processed by time `t`, each batch's rows spread evenly over its duration."""
    done = 0.0
    for b in batches:
        end = b.time
        rows = float(b.num_input_rows)
        start = end - b.batch_duration_ms / 1000.0
        if t >= end:
            done += rows
        elif t > start:
            done += rows * (t - start) / (end - start)
    return done


def window_from_samples(batches: Sequence[BatchRecord], t0: float, ends: Sequence[tuple[float, float]],
                        end0: float | None = None) -> Window:
    """Per-second processed records and backlog of a window that started at `t0`.

    `ends` holds (time, Σ end offsets of the input topic) sampled at the end of each second, `end0` the sum at
    `t0` (when known: then each second's arrivals are reported too); `batches` must include every batch
    running during the window (see the module docstring).
    """
    bs = distinct_batches(batches)
    processed, backlog, injected = [], [], []
    before = processed_by(bs, t0)
    last_end = end0
    for t, end in ends:
        now = processed_by(bs, t)
        processed.append(now - before)
        backlog.append(max(0.0, end - now))
        if last_end is not None:
            injected.append(end - last_end)
        before, last_end = now, end
    return Window(processed, backlog, injected)


def saturated_rate(batches: Sequence[BatchRecord]) -> float | None:
    """Throughput over the held-back batches of a drained burst: rows of the 2nd..last held-back batch over the
    time from the completion of the 1st to that of the last (whole batches only; the 1st, which also starts a
    new executor's Python workers, is left out); None with fewer than 3."""
    held = [b for b in distinct_batches(batches) if b.held_back and b.num_input_rows > 0]
    if len(held) < 3:
        return None
    span = held[-1].time - held[0].time
    rows = sum(b.num_input_rows for b in held[1:])
    return rows / span if span > 0 else None


def steady_rate(batches: Sequence[BatchRecord], since: float, last: int = 4) -> float | None:
    """Saturated throughput over the newest `last` + 1 held-back batches completed after `since` (wall time):
    what `LocalProbeTarget.warm_up` ends on, once its batches run at a steady speed with more records always
    waiting. None with fewer than 3 such batches."""
    held = [b for b in distinct_batches([b for b in batches if b.time > since])
            if b.held_back and b.num_input_rows > 0]
    return saturated_rate(held[-(last + 1):])


def warmed_up(batches: Sequence[BatchRecord], last: int = 3, rise: float = 0.15) -> bool:
    """True when the job no longer speeds up: the throughput (rows per second of batch duration) of the newest
    of its last `last` non-empty batches is at most `rise` above that of the oldest of them. False with fewer
    batches."""
    done = [b for b in distinct_batches(batches) if b.num_input_rows > 0 and b.batch_duration_ms]
    if len(done) < last:
        return False
    speeds = [b.num_input_rows * 1000.0 / b.batch_duration_ms for b in done[-last:]]
    return speeds[-1] <= speeds[0] * (1 + rise)


# -- the injector ------------------------------------------------------------------------------------------
class Injector:
    """A thread that sends ride records into the input topic at a set rate (records/s).

    Every tick (0.1 s) it sends what is due since the rate was set, one Kafka record batch per partition
    (round robin), through the job's lean producer (`jobs/produce.py`: acks=all, one request per batch, any
    failure raises), because kafka-python's per-record overhead could not keep up with a saturated job on a
    busy 2-core machine. Each record gets its own ride id, so every key is unique.
    """

    def __init__(self, bootstrap: str, topic: str, tag: str | None = None, pool: int = 2000,
                 tick_s: float = 0.1) -> None:
        from jobs.kafka_io import partition_counts
        from jobs.produce import BatchProducer
        from producer.source import synthetic_source

        self.topic = topic
        self.partitions = partition_counts(bootstrap, [topic])[topic]
        if not self.partitions:
            raise UserError(f"the input topic {topic!r} does not exist")
        self.producer = BatchProducer(bootstrap)
        self.tag = tag or secrets.token_hex(3)
        self.tick_s = tick_s
        self._rides = [r for _, r in zip(range(pool), synthetic_source(None, 500_000, seed=7), strict=False)]
        self.sent = 0  # records acknowledged by the broker
        self._rate = 0.0
        self._base_t = time.monotonic()
        self._base_sent = 0
        self._burst = 0
        self._busy = False  # a tick is sending
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
        """Send `count` more records at once (on top of the rate)."""
        with self._lock:
            self._burst += int(count)

    def _send(self, count: int) -> None:
        from producer.records import RideEncoder

        for _ in range(count):
            seq = self.sent
            ride = self._rides[seq % len(self._rides)]
            enc = RideEncoder(replace(ride, ride_id=f"probe{self.tag}x{seq}"))
            self.producer.send(self.topic, seq % self.partitions, enc.key_bytes, enc.value(0))
            self.sent += 1
        self.producer.flush()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.tick_s):
                with self._lock:
                    due = int(self._rate * (time.monotonic() - self._base_t)) - (self.sent - self._base_sent)
                    extra, self._burst = self._burst, 0
                    self._base_sent += extra  # burst records do not count against the rate
                    self._busy = due > 0 or extra > 0
                try:
                    if self._busy:
                        self._send(max(0, due) + extra)
                finally:
                    with self._lock:
                        self._busy = False
        except BaseException as err:  # noqa: BLE001 - reported to the caller by `check`
            self.error = err

    def check(self) -> None:
        """Re-raise a failure of the sending thread."""
        if self.error is not None:
            raise UserError(f"the probe's injector failed: {self.error}") from self.error

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until what is due is sent and acknowledged (called with the rate at 0)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check()
            with self._lock:
                idle = self._burst == 0 and self._rate == 0 and not self._busy
            if idle:
                return
            time.sleep(self.tick_s / 4)

    def close(self) -> None:
        """Stop the thread and release the connections."""
        self.set_rate(0)
        self._stop.set()
        self._thread.join(30)
        with contextlib.suppress(Exception):
            self.producer.close()


# -- the target --------------------------------------------------------------------------------------------
class LocalProbeTarget:
    """`ProbeTarget` on the local testbed's job (see the module docstring)."""

    def __init__(self, backend: LocalBackend, *, headroom: float = 0.3, burst_batches: int = 4,
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

    def _batches(self) -> list[BatchRecord]:
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
            if any(b.time >= t for b in self._batches()):
                return
            time.sleep(0.2)
        raise UserError(f"the job completed no micro-batch within {timeout_s:.0f} s; see {self.job.log_path}")

    # -- ProbeTarget --------------------------------------------------------------------------------------
    def configure(self, nodes: tuple[str, ...]) -> None:
        """Executors on exactly `nodes`, backlog drained. (A new executor's Python workers start during the
        first micro-batch of `upper_bound`'s burst, which the saturated throughput leaves out.)"""
        if not self.drain(self.settle_timeout_s):
            raise UserError(f"the backlog did not drain within {self.settle_timeout_s:.0f} s")
        lmap = self.backend.latency_map
        self.backend.apply(Placement(tuple(nodes), lmap.nd_max(nodes)))
        have = set(self.backend.current().nodes)
        if have != set(nodes):
            raise UserError(f"executors run on {sorted(have)}, not on {sorted(nodes)}")

    def warm_up(self, seconds: float, max_factor: float = 3.0) -> int:
        """Keep the job saturated (bursts of one micro-batch whenever fewer than two wait) for at least
        `seconds` and until its batches run at a steady speed (`warmed_up`), at most `max_factor` times
        `seconds`; then drain. Returns the records sent. A fresh job's micro-batches get several times shorter
        over its first minute or two (JIT in the driver and executors, more slowly on a busier machine), so the
        first configuration would otherwise be measured cold."""
        rows = self.job.settings.max_rows_per_batch
        start = self.injector.sent
        t0 = time.time()
        begun = time.monotonic()
        while True:
            self._alive()
            elapsed = time.monotonic() - begun
            if elapsed >= seconds * max_factor:
                self.say(f"    not steady after {elapsed:.0f} s; going on")
                break
            if elapsed >= seconds and warmed_up([b for b in self._batches() if b.time > t0]):
                break
            if self.backlog() < 2 * rows:
                self.injector.burst(rows)
                self.injector.flush()
            time.sleep(0.25)
        if not self.drain(self.settle_timeout_s):
            raise UserError(f"the warm-up's backlog did not drain within {self.settle_timeout_s:.0f} s")
        return self.injector.sent - start

    def steady_rate(self, since: float, last: int = 4) -> float | None:
        """`steady_rate` of the batches completed so far (module function)."""
        return steady_rate(self._batches(), since, last)

    def upper_bound(self, nodes: tuple[str, ...]) -> float:
        """Saturated throughput while draining a burst of `burst_batches` full batches, plus `headroom`."""
        t = time.time()
        self.injector.burst(self.burst_batches * self.job.settings.max_rows_per_batch)
        if not self.drain(self.settle_timeout_s):
            raise UserError(f"the burst did not drain within {self.settle_timeout_s:.0f} s")
        rate = saturated_rate([b for b in self._batches() if b.time > t])
        if rate is None:
            raise UserError("the burst was processed in fewer than 3 held-back micro-batches; cannot measure "
                            "the saturated throughput (is max_rows_per_batch set?)")
        self.saturated[tuple(nodes)] = rate
        self.say(f"    saturated throughput {rate:.0f}/s: searching from there, up to "
                 f"{rate * (1 + self.headroom):.0f}/s")
        return rate * (1 + self.headroom)

    def expected_mst(self, nodes: tuple[str, ...]) -> float | None:
        """The saturated throughput `upper_bound` measured: where the search starts (never a result)."""
        return self.saturated.get(tuple(nodes))

    def inject(self, rate: float, seconds: float) -> Window:
        """Inject `rate` records/s for `seconds` and report each second; rate 0 is a cool-down until drained."""
        t0 = time.time()
        if seconds <= 0:
            return Window([], [])
        if rate <= 0:
            self.drain(seconds)
            batches = self._batches()
            n = int(round(time.time() - t0))
            end = self.input_end()
            return window_from_samples(batches, t0, [(t0 + i + 1, end) for i in range(n)])
        end0 = float(self.input_end())
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
        window = window_from_samples(self._batches(), t0, ends, end0)
        if len(window.injected) > 2 and injector_fell_short(rate, sum(window.injected) / len(window.injected)):
            self.say(f"    (the injector reached {sum(window.injected) / len(window.injected):.0f} of {rate:.0f}/s: "
                     "the machine is too busy for this rate)")
        return window

    def close(self) -> None:
        """Stop injecting and release the clients (the testbed is torn down by its owner)."""
        self.injector.close()
        with contextlib.suppress(Exception):
            self._consumer.close()
