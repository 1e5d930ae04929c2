"""No silent loss: the producer verifies the topic by key at the end of every run, against a real embedded broker
killed with SIGKILL (it saves its state about once a second, so a fast restart loses what it had acknowledged).

Each test counts the topic's keys itself and asserts none lost and duplicates exactly as the run reported them.
The `own_broker` fixture is in tests/fixtures/faults.py; the kill at a random moment (fast and slow restart) and
the producer killed then resumed are in tests/faults/.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from gesscale.brokers import KafkaBroker
from gesscale.cli import main
from producer.run import ProduceOptions, prepare
from tests.faults.support import crash, key_counts, synthetic_keys


@pytest.mark.e2e
def test_kill_right_after_the_last_ack_is_found_and_restored(own_broker: KafkaBroker) -> None:
    """The issue's case, made deterministic: everything acknowledged, then kill -9 and a restart 0.3 s later,
    before the end verification. The broker lost what it had not saved; the verification re-sends it."""
    notes: list[str] = []
    run = prepare(ProduceOptions(rate=4000, duration_s=3, duplication=2, kafka=own_broker.bootstrap,
                                 topic="rides"), notes.append)  # fmt: skip
    verify = run.sink.verify
    after_crash: list[int] = []

    def crash_then_verify(timeout_s: float):
        crash(own_broker)
        after_crash.append(len(key_counts(own_broker.bootstrap, "rides")))  # the test's own count of the loss
        return verify(timeout_s)

    run.sink.verify = crash_then_verify  # type: ignore[method-assign]
    stats = run.run().stats
    v = stats.verification
    counts = key_counts(own_broker.bootstrap, "rides")
    assert stats.sent == stats.acked == 12_000 and stats.drained
    assert v is not None and v.ok and v.lost == 0, (v, notes)
    assert v.restored == 12_000 - after_crash[0]  # exactly what the crash lost was found and re-sent
    assert set(counts) == synthetic_keys(6_000, 2)
    assert sum(counts.values()) - len(counts) == v.duplicated
    print(f"kill -9 after last ack: {v.restored} acknowledged records missing and re-sent, "
          f"{v.duplicated} duplicated, 0 lost")  # fmt: skip


@pytest.mark.e2e
def test_a_broker_that_stays_away_ends_the_run_with_a_summary(own_broker: KafkaBroker, capsys) -> None:
    """Broker killed for good 1 s in: the run gives up after --give-up-after, prints its summary, exits 1."""
    chaos = threading.Thread(target=lambda: (time.sleep(1.0), own_broker.kill()))
    chaos.start()
    start = time.monotonic()
    code = main(["produce", "--rate", "1000", "--duration", "60", "--duplication", "1", "-b", own_broker.bootstrap,
                 "-t", "rides", "--give-up-after", "4", "-q"])  # fmt: skip
    took = time.monotonic() - start
    chaos.join()
    captured = capsys.readouterr()
    assert code == 1
    assert "gave up" in captured.err and "NOT acknowledged" in captured.out and "verified" in captured.out
    assert took < 45, f"gave up only after {took:.0f} s"
    print(f"broker gone for good: gave up after {took:.1f} s")


@pytest.mark.e2e
def test_sigterm_prints_the_verified_summary(own_broker: KafkaBroker) -> None:
    """SIGTERM ends `gesscale produce` as Ctrl-C does: stop sending, deliver, verify, summary, exit 130."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gesscale", "produce", "--rate", "500", "--duration", "60", "--duplication", "1",
         "-b", own_broker.bootstrap, "-t", "rides", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(4)
    proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "verified:" in out and "0 lost" in out, out
    sent = int(out.split("sent / acknowledged")[1].split("/")[0])
    counts = key_counts(own_broker.bootstrap, "rides")
    assert set(counts) == synthetic_keys(sent, 1), out
