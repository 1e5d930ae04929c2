"""The pacing loop: send each scheduled record when it is due, keep the sink serviced, report progress.

It sleeps until the next record is due (never busy-waits for more than a millisecond), sends everything already
due in one go, applies flow control when the sink has too many unacknowledged records (a broker outage: the
loop waits, then catches up), and at the end drains the sink so that "sent" means acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from producer.audit import Verification
from producer.records import RideEncoder
from producer.schedule import Scheduled
from producer.sinks import Sink


class GiveUp(Exception):
    """The broker stayed unreachable longer than the run's `give_up_after_s`."""


@dataclass
class ReplayStats:
    """Live and final figures of one replay (all times in seconds since the first record was due)."""

    planned: int | None = None
    sent: int = 0
    acked: int = 0
    pending: int = 0
    resent: int = 0
    restored: int = 0
    last_due_s: float = 0.0
    last_send_s: float = 0.0
    elapsed_s: float = 0.0
    worst_lag_s: float = 0.0
    drained: bool = True
    interrupted: bool = False
    gave_up: bool = False
    verification: Verification | None = None
    verify_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def target_rate(self) -> float:
        """Records/s the schedule asked for: records sent over the schedule's span."""
        return self.sent / self.last_due_s if self.last_due_s > 0 else 0.0

    @property
    def achieved_rate(self) -> float:
        """Records/s actually sent: records over the time from start to the last send."""
        return self.sent / self.last_send_s if self.last_send_s > 0 else 0.0

    @property
    def rate_error(self) -> float:
        """Relative shortfall of the achieved rate (0.03 = 3 % slower than asked)."""
        return 1.0 - self.achieved_rate / self.target_rate if self.target_rate else 0.0


def replay(
    schedule: Iterable[Scheduled[RideEncoder]],
    sink: Sink,
    *,
    max_pending: int = 100_000,
    limit: int | None = None,
    planned: int | None = None,
    progress: Callable[[ReplayStats], None] | None = None,
    progress_every_s: float = 0.25,
    drain_timeout_s: float = 300.0,
    give_up_after_s: float | None = None,
    verify_timeout_s: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ReplayStats:
    """Send `schedule` (due second, encoded ride, copy) to `sink` on time; stop after `limit` records if given.
    Ctrl-C (or SIGTERM turned into KeyboardInterrupt by the CLI) ends it early, cleanly. A broker unreachable
    for longer than `give_up_after_s` ends it too (`gave_up`), so that a run never retries forever.

    At the end the sink is drained and then verified (`sink.verify`): the destination is read back and every
    record it lacks is re-sent, since an acknowledgement alone does not prove the record survived.

    `planned` (records the schedule holds, when known) is only carried to the progress callback. The figures
    of `stats` are kept in locals while sending (this loop runs once per record) and written back every 1024
    records, before each progress report and at the end.
    """
    stats = ReplayStats(planned=planned if limit is None or planned is None else min(planned, limit))
    stop_at = -1 if limit is None else max(limit, 0)
    send = sink.send
    sent = 0
    last_due = last_send = worst_lag = 0.0
    start = clock()
    next_report = 0.0

    def check_broker() -> None:
        if give_up_after_s is not None and sink.down_for(clock()) > give_up_after_s:
            raise GiveUp

    try:
        for due, enc, dup in schedule:
            if sent == stop_at:
                break
            now = clock() - start
            if now < due:
                _store(stats, sent, last_due, last_send, worst_lag)
                while now < due:
                    sink.service()
                    check_broker()
                    if progress is not None and now >= next_report:
                        _refresh(stats, sink, now)
                        progress(stats)
                        next_report = now + progress_every_s
                    sleep(min(due - now, 0.05))
                    now = clock() - start
            send(enc.key_bytes, enc.value(dup), enc.key_hash)
            sent += 1
            last_due = due
            last_send = now
            if now - due > worst_lag:
                worst_lag = now - due
            if sent & 1023 == 0:
                _store(stats, sent, last_due, last_send, worst_lag)
                sink.service()
                check_broker()
                while sink.pending() > max_pending:
                    sleep(0.005)
                    sink.service()
                    check_broker()
                if progress is not None and now >= next_report:
                    _refresh(stats, sink, now)
                    progress(stats)
                    next_report = now + progress_every_s
    except KeyboardInterrupt:
        stats.interrupted = True
        stats.notes.append("interrupted: stopped sending, delivering what was sent")
    except GiveUp:
        stats.gave_up = True
        stats.notes.append(f"gave up: the broker was unreachable for more than {give_up_after_s:g} s")
    _store(stats, sent, last_due, last_send, worst_lag)
    stats.drained = _drain(sink, drain_timeout_s, give_up_after_s, stats, clock)
    _refresh(stats, sink, clock() - start)  # elapsed: to the last acknowledgement, the verification apart
    if stats.drained:
        began = clock()
        try:
            stats.verification = sink.verify(verify_timeout_s)
        except KeyboardInterrupt:
            stats.interrupted = True
            stats.notes.append("interrupted during the end verification: not verified")
        stats.verify_s = clock() - began
        _refresh(stats, sink, stats.elapsed_s)
    if progress is not None:
        progress(stats)
    return stats


def _drain(sink: Sink, timeout_s: float, give_up_after_s: float | None, stats: ReplayStats,
           clock: Callable[[], float]) -> bool:
    """Drain the sink; while the broker is away, only until `give_up_after_s` of outage (at once when the run
    already gave up). Ctrl-C during the drain gives up too."""
    if give_up_after_s is None:
        try:
            return sink.drain(timeout_s)
        except KeyboardInterrupt:
            stats.interrupted = True
            return False
    deadline = clock() + timeout_s
    try:
        while clock() < deadline:
            if sink.drain(min(1.0, max(0.0, deadline - clock()))):
                return True
            if stats.gave_up or sink.down_for(clock()) > give_up_after_s:
                if not stats.gave_up:
                    stats.gave_up = True
                    stats.notes.append(f"gave up: the broker was unreachable for more than {give_up_after_s:g} s")
                return False
    except KeyboardInterrupt:
        stats.interrupted = True
    return False


def _store(stats: ReplayStats, sent: int, last_due: float, last_send: float, worst_lag: float) -> None:
    stats.sent, stats.last_due_s, stats.last_send_s, stats.worst_lag_s = sent, last_due, last_send, worst_lag


def _refresh(stats: ReplayStats, sink: Sink, now: float) -> None:
    stats.acked = sink.acked
    stats.pending = sink.pending()
    stats.resent = sink.resent
    stats.restored = sink.restored
    stats.elapsed_s = now
