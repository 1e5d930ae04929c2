"""`gesscale broker up|status|down|check` end to end, in-process."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

from gesscale.brokers.conformance import PROBES
from gesscale.cli import main
from gesscale.process import free_port, port_answers
from tests.fixtures.kafka import KAFKA_PORTS, MQTT_PORTS, scratch_dir


@pytest.fixture
def broker_dir():
    path = scratch_dir("gesscale-cli-broker-")
    yield path
    main(["broker", "down", "--data-dir", str(path)])
    shutil.rmtree(path, ignore_errors=True)


def test_up_status_down(broker_dir, capsys) -> None:
    kport, mport = free_port(*KAFKA_PORTS), free_port(*MQTT_PORTS)
    args = ["--kafka-port", str(kport), "--mqtt-port", str(mport), "--data-dir", str(broker_dir)]
    assert main(["broker", "up", *args]) == 0
    out = capsys.readouterr().out
    assert f"started noida-db on 127.0.0.1:{kport}" in out and f"all {len(PROBES)} conformance probes pass" in out
    assert port_answers(kport) and port_answers(mport)

    assert main(["broker", "up", *args]) == 0  # idempotent
    assert out.count("started") == 2 and "already running" in capsys.readouterr().out

    assert main(["broker", "status", "--data-dir", str(broker_dir)]) == 0
    status = capsys.readouterr().out
    assert "kafka" in status and "mosquitto" in status and " up " in status

    assert main(["broker", "down", "--data-dir", str(broker_dir)]) == 0
    assert capsys.readouterr().out.count("stopped") == 2
    assert not port_answers(kport) and not port_answers(mport)


def test_port_taken_is_one_line_exit_2(broker_dir, capsys) -> None:
    port = free_port(*KAFKA_PORTS)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        code = main(["broker", "up", "--kafka-port", str(port), "--no-mqtt", "--data-dir", str(broker_dir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"gesscale: error: Kafka port 127.0.0.1:{port} is already taken (choose another with --kafka-port)"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's mosquitto drops to the mosquitto user")
def test_failed_start_leaves_nothing_running(broker_dir, tmp_path, capsys) -> None:
    """Kafka starts, mosquitto cannot (its dir is unreachable): Kafka is stopped again, nothing recorded."""
    kport = free_port(*KAFKA_PORTS)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    code = main(["broker", "up", "--kafka-port", str(kport), "--mqtt-port", str(free_port(*MQTT_PORTS)),
                 "--no-check", "--data-dir", str(private / "brokers")])  # fmt: skip
    assert code == 2
    assert "cannot enter" in capsys.readouterr().err
    assert not port_answers(kport)


def test_check_against_nothing_is_a_user_error(capsys) -> None:
    assert main(["broker", "check", "--bootstrap", f"127.0.0.1:{free_port(*KAFKA_PORTS)}"]) == 2
    assert "no broker answers" in capsys.readouterr().err
