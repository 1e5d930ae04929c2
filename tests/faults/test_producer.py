"""`gesscale produce` killed with `kill -9` at a random moment, then the same command with `--resume`: every key once
in the topic, none twice. Moved here from tests/producer/test_verified_delivery.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gesscale.brokers import KafkaBroker
from gesscale.cli import main
from tests.faults.support import fault, key_counts, synthetic_keys, tally


@pytest.mark.e2e
def test_resume_after_the_producer_is_killed_sends_the_rest_once(own_broker: KafkaBroker, tmp_path: Path) -> None:
    f = fault("producer, then --resume")
    args = ["produce", "--rate", "2000", "--duration", "5", "--duplication", "2", "-b", own_broker.bootstrap,
            "-t", "rides", "-q"]  # fmt: skip
    first = subprocess.Popen([sys.executable, "-m", "gesscale", *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(f.moment(3.0, 5.0))  # the interpreter takes ~1.5 s to start sending
    first.kill()
    first.wait()
    before = key_counts(own_broker.bootstrap, "rides")
    out = tmp_path / "summary.json"
    assert main([*args, "--resume", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    counts = key_counts(own_broker.bootstrap, "rides")
    lost, duplicated = tally(counts, synthetic_keys(5_000, 2))
    f.record(10_000, lost, duplicated, f"--resume skipped {summary['resumed_skipped']} held, sent {summary['sent']}")
    assert 0 < len(before) < 10_000, "the kill did not land mid-run"
    assert summary["resumed_skipped"] == len(before) and summary["sent"] == 10_000 - len(before)
    assert (lost, duplicated) == (0, 0)
