"""Where the producer's records go: Kafka (kafka-python) here, MQTT in `producer.mqtt_sink`, behind one small
interface.

A sink accepts records without blocking, learns asynchronously which were acknowledged, and never forgets a
record it was given: a record whose delivery failed (broker gone longer than the client's own retries) goes
back into a retry queue that is re-sent, with exponential backoff, once the broker answers again. Progress and
outages are reported through `notify`.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol

from kafka.errors import KafkaError

from gesscale.brokers.security import kafka_client_config
from gesscale.errors import UserError
from producer.audit import Ledger, Verification
from producer.keyhash import key_partition

Notify = Callable[[str], None]


class Sink(Protocol):
    """What the replay loop needs from a destination."""

    acked: int
    resent: int
    restored: int

    def send(self, key: bytes, value: bytes, key_hash: int | None = None) -> None:
        """Hand over one record (non-blocking apart from client-side buffering); `key_hash`, when given, is
        `producer.keyhash.key_hash(key)` computed beforehand (saves the sink computing it)."""

    def service(self) -> None:
        """Collect acknowledgements and re-send failed records when their backoff has passed."""

    def pending(self) -> int:
        """Records handed over but not yet acknowledged (including those waiting for a retry)."""

    def drain(self, timeout_s: float) -> bool:
        """Wait until every record is acknowledged; False when `timeout_s` passed first."""

    def down_for(self, now: float) -> float:
        """Seconds (monotonic `now`) the broker has been unreachable without a break; 0 while it answers."""

    def verify(self, timeout_s: float) -> Verification | None:
        """At the end of a run: check the destination holds every record handed over, re-send what it lacks;
        None when the destination cannot be read back (MQTT)."""

    def close(self) -> None:
        """Release the client."""


def client_settings(
    *, linger_ms: int = 20, batch_size: int = 256 * 1024, delivery_timeout_ms: int = 30_000
) -> dict[str, Any]:
    """The kafka-python KafkaProducer options of the producer's Kafka sink (benchmarks/bench_producer.py gives
    its bare loop the same)."""
    return {
        "client_id": "gesscale-producer",
        "acks": "all",
        # Not idempotent: after a restart noida-db forgets producer state, and an idempotent client can then be
        # told DUPLICATE_SEQUENCE_NUMBER (which kafka-python counts as success) for records the broker does not
        # hold. Duplicates are tolerated downstream (unique keys); losses are not.
        "enable_idempotence": False,
        "linger_ms": linger_ms,
        "batch_size": batch_size,
        "delivery_timeout_ms": delivery_timeout_ms,
        "request_timeout_ms": min(10_000, delivery_timeout_ms - linger_ms - 1),
        "max_block_ms": 2_000,
        "reconnect_backoff_ms": 200,
        "reconnect_backoff_max_ms": 5_000,
        "retry_backoff_ms": 200,
        "bootstrap_timeout_ms": 10_000,
    }


class Backoff:
    """Exponential backoff between retry rounds: 0.5 s doubling up to 10 s, reset on success."""

    def __init__(self, first_s: float = 0.5, max_s: float = 10.0) -> None:
        self.first_s, self.max_s = first_s, max_s
        self.delay_s = 0.0
        self.next_at = 0.0

    def ready(self, now: float) -> bool:
        """True when a retry may be attempted now."""
        return now >= self.next_at

    def failed(self, now: float) -> float:
        """Record a failed round; returns the wait until the next one."""
        self.delay_s = self.first_s if self.delay_s == 0 else min(self.max_s, self.delay_s * 2)
        self.next_at = now + self.delay_s
        return self.delay_s

    def succeeded(self) -> None:
        """Reset after the broker answered."""
        self.delay_s, self.next_at = 0.0, 0.0


class OutageTracker:
    """Turns "acks stopped / failures seen" into one report when an outage starts and one when it ends."""

    def __init__(self, notify: Notify, what: str, stall_s: float = 3.0) -> None:
        self.notify, self.what, self.stall_s = notify, what, stall_s
        self.since: float | None = None
        self.outages = 0
        self.down_s = 0.0

    def down(self, now: float, detail: str) -> None:
        """The broker looks unreachable."""
        if self.since is None:
            self.since = now
            self.outages += 1
            self.notify(f"{self.what} unreachable: {detail}; retrying with backoff")

    def up(self, now: float, pending: int) -> None:
        """Acks flow again."""
        if self.since is not None:
            self.down_s += now - self.since
            self.notify(f"{self.what} back after {now - self.since:.1f} s; {pending} records still in flight")
            self.since = None

    def down_for(self, now: float) -> float:
        """Seconds the current outage has lasted at `now` (0 when there is none)."""
        return 0.0 if self.since is None else now - self.since


class KafkaSink:
    """Kafka through kafka-python: batching, key = ride id, acks=all, failed records re-sent, outages verified.

    An acknowledgement is not trusted blindly around an outage: the embedded broker (noida-db) was measured to
    lose records it had acknowledged just before a stop, and seconds of them when its state is large (see
    docs/data-plane.md). So the sink keeps a journal of what it sent in the last `journal_s` seconds (and
    everything during an outage); once an outage is over and everything sent before the recovery is
    acknowledged, it reads the topic back from shortly before the outage, and re-sends every journal record
    whose unique key is not there. Against a broker that keeps its acks (a real Kafka) this finds nothing and
    sends nothing twice.
    """

    def __init__(self, bootstrap: str, topic: str, notify: Notify, *, linger_ms: int = 20,
                 batch_size: int = 256 * 1024, delivery_timeout_ms: int = 30_000,
                 journal_s: float = 10.0) -> None:  # fmt: skip
        from kafka import KafkaProducer

        self.bootstrap, self.topic, self.notify = bootstrap, topic, notify
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap,
                **client_settings(linger_ms=linger_ms, batch_size=batch_size, delivery_timeout_ms=delivery_timeout_ms),
                **kafka_client_config(),
            )
        except KafkaError as err:
            raise UserError(f"cannot reach Kafka at {bootstrap}: {err}") from None
        # (future, key, value, counted, seq) in flight; (key, value, counted, seq) waiting for a retry; (wall
        # time, seq, key, value) journal of first sends. `counted`: already counted as acknowledged once.
        self._inflight: collections.deque = collections.deque()
        self._retry: collections.deque = collections.deque()
        self._journal: collections.deque = collections.deque()
        self._journal_s = journal_s
        self._seq = 0
        self._suspect_since: float | None = None  # wall time from which acks are not trusted
        self._verify_before_seq: int | None = None  # set when an outage ends: verify what was sent before
        try:
            self._partitions: list[int] | None = sorted(self._producer.partitions_for(topic) or []) or None
        except KafkaError:
            self._partitions = None  # let kafka-python's partitioner decide
        self._last_key: bytes | None = None
        self._last_partition: int | None = None
        self._backoff = Backoff()
        self._outage = OutageTracker(notify, f"Kafka {bootstrap}")
        self._last_ack = time.monotonic()
        self._last_ack_wall = time.time()
        self.acked = 0
        self.resent = 0
        self.restored = 0
        self.ledger = Ledger()  # every record of the run, for the end verification (producer.audit)

    def send(self, key: bytes, value: bytes, key_hash: int | None = None) -> None:
        """Queue one record; while earlier records wait for a retry it queues behind them."""
        seq = self._seq
        self._seq = seq + 1
        self._journal.append((time.time(), seq, key, value))
        self.ledger.add(key, value)
        if self._retry:
            self._retry.append((key, value, False, seq))
            return
        partitions = self._partitions
        if partitions is not None and key_hash is not None:
            self._send(key, value, False, seq, partitions[key_hash % len(partitions)])
        else:
            self._send(key, value, False, seq, self._partition(key))

    def _send(self, key: bytes, value: bytes, counted: bool, seq: int, partition: int | None) -> bool:
        try:
            future = self._producer.send(self.topic, key=key, value=value, partition=partition)
        except KafkaError as err:
            self._retry.appendleft((key, value, counted, seq))
            self._broker_trouble(time.monotonic(), f"send failed ({type(err).__name__})")
            return False
        self._inflight.append((future, key, value, counted, seq))
        return True

    def _partition(self, key: bytes) -> int | None:
        """kafka-python's default choice (murmur2 of the key, as the Java client), computed once per ride when
        the caller did not give the key's hash: the copies of a ride share one key object, and the partition
        list is cached."""
        if key is self._last_key:
            return self._last_partition
        partition = None if self._partitions is None else key_partition(key, self._partitions)
        self._last_key, self._last_partition = key, partition
        return partition

    def _broker_trouble(self, now: float, detail: str) -> None:
        """An outage (or a broker restart) is suspected: back off, and distrust acks from shortly before it."""
        self._outage.down(now, detail)
        if self._backoff.ready(now):
            self._backoff.failed(now)
        since = self._last_ack_wall - self._journal_s
        self._suspect_since = since if self._suspect_since is None else min(self._suspect_since, since)
        self._verify_before_seq = None

    def service(self) -> None:
        """Count acks, retry failed records, verify after an outage, trim the journal."""
        now = time.monotonic()
        inflight = self._inflight
        acks = first = 0  # acknowledgements collected in this call; of records not counted before
        while inflight:
            entry = inflight[0]
            future = entry[0]
            if not future.is_done:
                break
            inflight.popleft()
            if future.exception is None:  # future.succeeded(), without the call
                acks += 1
                first += not entry[3]
            else:
                self._acknowledged(now, acks, first)  # the acks before this failure count first
                acks = first = 0
                _, key, value, counted, seq = entry
                self._retry.append((key, value, counted, seq))
                self._broker_trouble(now, f"delivery failed ({type(future.exception).__name__})")
        self._acknowledged(now, acks, first)
        if inflight and now - self._last_ack > self._outage.stall_s:
            self._broker_trouble(now, f"no acknowledgement for {now - self._last_ack:.0f} s, {len(inflight)} in flight")
        elif self._outage.since is not None and now - self._last_ack < 1.0 and not self._retry:
            self._backoff.succeeded()
            self._outage.up(now, self.pending())
            self._verify_before_seq = self._seq
        if self._retry and self._backoff.ready(now):
            self._resend()
        if self._verify_before_seq is not None and self._sent_before_acked(self._verify_before_seq):
            self._verify()
        if self._suspect_since is None:
            horizon = time.time() - self._journal_s
            journal = self._journal
            while journal and journal[0][0] < horizon:
                journal.popleft()

    def _acknowledged(self, now: float, acks: int, first: int) -> None:
        """Book `acks` acknowledgements seen at `now` (one clock read per batch of them, not per record)."""
        if acks:
            self.acked += first
            self._last_ack = now
            self._last_ack_wall = time.time()

    def _sent_before_acked(self, seq: int) -> bool:
        """True when every record sent before `seq` is acknowledged (nothing older in flight or in retry)."""
        return all(e[4] >= seq for e in self._inflight) and all(e[3] >= seq for e in self._retry)

    def _verify(self) -> None:
        """Read the topic back from before the outage; re-send journal records the broker does not hold."""
        from producer.verify import record_id, record_ids_since

        since, upto = self._suspect_since or 0.0, self._verify_before_seq or 0
        if not self._backoff.ready(time.monotonic()):
            return
        try:
            held = record_ids_since(self.bootstrap, self.topic, int((since - 1.0) * 1000))
        except KafkaError as err:
            wait = self._backoff.failed(time.monotonic())
            self.notify(f"reading back after the outage failed ({type(err).__name__}); again in {wait:.1f} s")
            return
        checked = missing = 0
        for sent_at, seq, key, value in self._journal:
            if sent_at < since or seq >= upto:
                continue
            checked += 1
            if record_id(value) not in held:
                missing += 1
                self._send(key, value, True, seq, self._partition(key))
        self.restored += missing
        self._suspect_since = self._verify_before_seq = None
        self.notify(f"verified {checked} records sent around the outage: {missing} missing at the broker, re-sent")

    def _resend(self) -> None:
        """Hand the retry queue back to the client; a send that fails again re-arms the backoff."""
        while self._retry:
            key, value, counted, seq = self._retry.popleft()
            if not self._send(key, value, counted, seq, self._partition(key)):
                return
            self.resent += 1

    def pending(self) -> int:
        """Records not yet acknowledged, plus a pending post-outage verification (counted as one)."""
        return len(self._inflight) + len(self._retry) + (self._suspect_since is not None)

    def drain(self, timeout_s: float) -> bool:
        """Flush and service until nothing is pending (verification included) or the timeout passes."""
        deadline = time.monotonic() + timeout_s
        while self.pending() and time.monotonic() < deadline:
            with contextlib.suppress(KafkaError):  # a flush timeout just means: not yet
                self._producer.flush(timeout=0.5)
            self.service()
            if self._retry or self._suspect_since is not None:
                time.sleep(0.05)
        return self.pending() == 0

    def down_for(self, now: float) -> float:
        """Seconds the broker has been unreachable (see Sink.down_for)."""
        return self._outage.down_for(now)

    def verify(self, timeout_s: float, rounds: int = 3) -> Verification:
        """Read the topic back from before the run, re-send every record of the ledger it lacks, drain, read
        again: up to `rounds` read-backs within `timeout_s`. Acknowledged is not enough (producer.audit)."""
        from producer.audit import verify_run

        deadline = time.monotonic() + timeout_s

        def resend(records: list[tuple[bytes | None, bytes]]) -> None:
            for key, value in records:
                self._send(key, value, True, self._seq, self._partition(key))  # type: ignore[arg-type]
            self.restored += len(records)
            self.drain(max(0.0, deadline - time.monotonic()))

        return verify_run(self.ledger, self.bootstrap, self.topic, resend, self.notify, timeout_s, rounds)

    def close(self) -> None:
        """Close the producer without waiting for unsent records (drain first)."""
        close_producer(self._producer, 1.0)


def close_producer(producer: Any, timeout_s: float) -> None:
    """Close a kafka-python producer, and make sure nothing it still holds is sent afterwards.

    kafka-python's `close(timeout)` flushes first and, when the flush times out (broker away), raises before it
    reaches its own force-close: the sender thread would live on and deliver the records of a run that had
    given up, later, to whatever broker answers at that address (seen in a test). So stop the sender then.
    """
    try:
        producer.close(timeout=timeout_s)
    except KafkaError:
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            sender.force_close()
            sender.join(timeout_s)
