"""The embedded Kafka broker killed with `kill -9` at a random moment of a `gesscale produce` run, back 0.3 s later
(before the producer notices a stall) or 5 s later (after it noticed): the run's end verification finds what the
broker lost and re-sends it. Moved here from tests/producer/test_verified_delivery.py (fast case); the slow
restart is new."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from gesscale.brokers import KafkaBroker
from gesscale.cli import main
from tests.faults.support import crash, fault, key_counts, synthetic_keys, tally


@pytest.mark.e2e
@pytest.mark.parametrize("down_s", [0.3, 5.0], ids=["fast-restart", "slow-restart"])
def test_kafka_killed_at_a_random_moment_loses_nothing(own_broker: KafkaBroker, tmp_path: Path,
                                                       down_s: float) -> None:
    f = fault(f"Kafka broker, back {down_s:g} s later")
    moment = f.moment(1.0, 4.0)
    chaos = threading.Thread(target=lambda: (time.sleep(moment), crash(own_broker, down_s)))
    out = tmp_path / "summary.json"
    chaos.start()
    code = main(["produce", "--rate", "3000", "--duration", "6", "--duplication", "1", "-b", own_broker.bootstrap,
                 "-t", "rides", "--json", str(out), "-q"])  # fmt: skip
    chaos.join()
    summary = json.loads(out.read_text())
    v = summary["verification"]
    counts = key_counts(own_broker.bootstrap, "rides")
    lost, duplicated = tally(counts, synthetic_keys(18_000, 1))
    f.record(18_000, lost, duplicated,
             f"{v['restored']} found missing at the end and re-sent; {v['duplicated']} duplicates reported")
    assert code == 0, summary
    assert v["verified"] and v["lost"] == 0 and v["expected"] == 18_000
    assert lost == 0
    assert duplicated == v["duplicated"]  # any duplicate is one the producer reported itself
