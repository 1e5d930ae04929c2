"""The durability probe: acknowledged records, kill -9, restart, count. noida-db 0.2.3 fails it (it saves its state
about once a second), which is why the producer and the bridge verify every run by key (producer.audit)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest

from gesscale.brokers import KafkaBroker, start_kafka
from gesscale.brokers.conformance import KILL_PROBE, probe_acked_survive_kill
from gesscale.cli import main
from gesscale.process import free_port
from tests.fixtures.kafka import KAFKA_PORTS, scratch_dir


@pytest.fixture
def own_broker() -> Iterator[KafkaBroker]:
    scratch = scratch_dir("gesscale-killprobe-")
    broker = start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka")
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.e2e
def test_embedded_broker_loses_acknowledged_records_on_kill_9(own_broker: KafkaBroker) -> None:
    """The finding of issue 17: no noida-db option makes an acknowledgement survive kill -9."""

    def crash() -> None:
        own_broker.kill()
        time.sleep(0.3)
        own_broker.restart()

    result = probe_acked_survive_kill(own_broker.bootstrap, crash)
    missing = int(result.detail.split(", ")[1].split()[0])
    assert not result.ok and missing > 0, result.detail
    print(f"noida-db: {result.detail}")


@pytest.mark.e2e
def test_the_probe_passes_when_nothing_acknowledged_is_lost(own_broker: KafkaBroker) -> None:
    """Same probe with a 'crash' that keeps the broker (as a durable broker would behave): it passes."""
    result = probe_acked_survive_kill(own_broker.bootstrap, lambda: None, records=500)
    assert result.ok and result.detail.startswith("500 of 500 acknowledged, 0 of them missing"), result.detail


@pytest.mark.e2e
def test_broker_check_kill_restart_on_the_recorded_broker(tmp_path, capsys) -> None:
    data = tmp_path / "brokers"
    port = free_port(*KAFKA_PORTS)
    assert main(["broker", "up", "--no-mqtt", "--no-check", "--kafka-port", str(port), "--data-dir", str(data)]) == 0
    try:
        code = main(["broker", "check", "-b", f"127.0.0.1:{port}", "--kill-restart", "--data-dir", str(data)])
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if KILL_PROBE in line)
        assert code == 1 and "FAIL" in row, out
        assert main(["broker", "status", "--data-dir", str(data)]) == 0
        assert " up " in capsys.readouterr().out  # restarted and recorded under its new PID
    finally:
        main(["broker", "down", "--data-dir", str(data)])


def test_kill_restart_needs_a_recorded_broker(tmp_path, capsys, kafka_bootstrap: str) -> None:
    code = main(["broker", "check", "-b", kafka_bootstrap, "--kill-restart", "--data-dir", str(tmp_path)])
    assert code == 2 and "no running Kafka" in capsys.readouterr().err
