"""The end-of-run audit: does the topic hold every record this run had acknowledged, by unique key?

An acknowledgement is not proof of durability: the embedded broker (noida-db) saves its state about once a
second, so `kill -9` loses whatever it acknowledged since the last save, without any error reaching the client
when it restarts quickly (docs/data-plane.md). So every producer and bridge run keeps what it sent (a
`Ledger`), reads the topic back at the end from shortly before the run started, and compares by the records'
unique keys. What is missing is re-sent by the caller; what cannot be restored is reported as lost.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from producer.verify import record_id

READ_BACK_MARGIN_S = 2.0  # read from this long before the run's start (client and broker clocks, batching)


@dataclass
class Ledger:
    """Every record a run handed over, by its unique key: what the audit expects to find in the topic.

    Keeps the values (to re-send what is missing): about the record's size plus 100 bytes per record, for the
    whole run. A record whose value has no producer key (`{"key": ...}`) is identified by its whole value.
    """

    started_wall: float = field(default_factory=time.time)
    records: dict[bytes, tuple[bytes | None, bytes]] = field(default_factory=dict)

    def add(self, key: bytes | None, value: bytes) -> None:
        """Remember one record (the same id again, a re-send, is kept once)."""
        self.records[identity(value)] = (key, value)

    def __len__(self) -> int:
        return len(self.records)

    def since_ms(self) -> int:
        """Where the read-back starts: the run's start less a margin, in ms since the epoch."""
        return int((self.started_wall - READ_BACK_MARGIN_S) * 1000)


def identity(value: bytes) -> bytes:
    """A record's id for the audit: its producer key, else the whole value."""
    rid = record_id(value)
    return rid if rid is not None else value


@dataclass
class AuditResult:
    """One read-back compared with the ledger: how many expected, found, missing, found more than once."""

    expected: int
    found: int
    missing: list[bytes]
    duplicated: int

    @property
    def complete(self) -> bool:
        """True when every expected record is in the topic."""
        return not self.missing


def held_counts(bootstrap: str, topic: str, since_ms: int, settle_s: float = 1.0,
                client_config: dict | None = None) -> Counter[bytes]:  # fmt: skip
    """How many times each record id occurs in `topic` from `since_ms` on (read to the current end)."""
    from gesscale.brokers.topics import read_values

    return Counter(identity(value) for _, _, value in read_values(bootstrap, topic, settle_s=settle_s,
                                                                  since_ms=since_ms, client_config=client_config))


def compare(ledger: Ledger, held: Counter[bytes]) -> AuditResult:
    """The ledger against what the topic holds (records not of this run are ignored)."""
    missing = [rid for rid in ledger.records if held.get(rid, 0) == 0]
    duplicated = sum(held[rid] - 1 for rid in ledger.records if held.get(rid, 0) > 1)
    return AuditResult(len(ledger), len(ledger) - len(missing), missing, duplicated)


@dataclass
class Verification:
    """The outcome of a run's end verification, for the summary: `ok` when every acknowledged record was found
    in the topic (after re-sending what was missing), else `lost` records could not be restored."""

    expected: int = 0
    found: int = 0
    lost: int = 0
    duplicated: int = 0
    restored: int = 0
    rounds: int = 0
    ok: bool = False
    error: str = ""

    @classmethod
    def of(cls, result: AuditResult, restored: int, rounds: int) -> Verification:
        """The verification that ends with `result` after `restored` re-sent records and `rounds` read-backs."""
        return cls(result.expected, result.found, len(result.missing), result.duplicated, restored, rounds,
                   result.complete)


def verify_run(ledger: Ledger, bootstrap: str, topic: str, resend: Callable[[list[tuple[bytes | None, bytes]]], None],
               notify: Callable[[str], None], timeout_s: float, rounds: int = 3,
               client_config: dict | None = None) -> Verification:  # fmt: skip
    """Read `topic` back from before the run, hand every record of `ledger` it lacks to `resend` (which returns
    once they are acknowledged or it gave up), read again: up to `rounds` read-backs within `timeout_s`."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    restored = 0
    outcome = Verification(expected=len(ledger), lost=len(ledger), error="the topic could not be read back")
    n = 0
    while n < rounds and time.monotonic() < deadline:
        try:
            held = held_counts(bootstrap, topic, ledger.since_ms(), client_config=client_config)
        except KafkaError as err:
            outcome.error = f"reading the topic back failed: {type(err).__name__}"
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            continue
        n += 1
        result = compare(ledger, held)
        outcome = Verification.of(result, restored, n)
        if result.complete or n == rounds or time.monotonic() >= deadline:
            break
        notify(f"verification: {len(result.missing)} of {result.expected} records missing from the topic although "
               "acknowledged; re-sending them")  # fmt: skip
        resend([ledger.records[rid] for rid in result.missing])
        restored += len(result.missing)
    return outcome
