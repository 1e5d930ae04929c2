"""The audit's comparison by key and the resume filter, without a broker (the e2e tests use a real one)."""

from __future__ import annotations

import json
from collections import Counter

from producer.audit import Ledger, compare, identity
from producer.resume import ResumeCount, skip_held
from producer.synthetic import synthetic_encoded


def record(key: str) -> bytes:
    return json.dumps({"key": key, "ride_id": key.split("-")[0]}).encode()


def test_compare_counts_missing_and_duplicated_by_key_and_ignores_other_records() -> None:
    ledger = Ledger()
    for key in ("1-0", "1-1", "2-0", "3-0"):
        ledger.add(key.split("-")[0].encode(), record(key))
    ledger.add(b"1", record("1-0"))  # a re-send is one record
    held = Counter([identity(record("1-0")), identity(record("1-0")), identity(record("2-0")),
                    identity(record("9-0")), b"not a producer record"])  # fmt: skip
    result = compare(ledger, held)
    assert (result.expected, result.found, result.duplicated) == (4, 2, 1)
    assert sorted(result.missing) == [b"1-1", b"3-0"] and not result.complete


def test_a_payload_without_a_producer_key_is_identified_by_its_bytes() -> None:
    assert identity(b'{"ride_id": "7"}') == b'{"ride_id": "7"}'
    assert identity(record("7-2")) == b"7-2"


def test_skip_held_drops_held_records_and_starts_the_rest_at_once() -> None:
    encoders = next(iter(synthetic_encoded(days=1, rides_per_day=2000, seed=3)))[:5]
    schedule = [(10.0 + i, enc, dup) for i, enc in enumerate(encoders) for dup in range(2)]
    held = {identity(enc.value(dup)) for _, enc, dup in schedule[:4]} | {identity(schedule[6][1].value(0))}
    count = ResumeCount()
    kept = list(skip_held(schedule, held, count))
    assert count.skipped == 5 and count.held == 5
    assert [(enc.key_bytes, dup) for _, enc, dup in kept] == [
        (enc.key_bytes, dup) for i, (_, enc, dup) in enumerate(schedule) if i >= 4 and i != 6]
    assert [due for due, _, _ in kept] == [0.0, 0.0, 1.0, 2.0, 2.0]  # from the first kept record's due time
