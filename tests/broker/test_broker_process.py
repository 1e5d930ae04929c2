"""Broker management from code: start, answer, stop; clear errors for a taken port or a missing binary."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from gesscale.brokers import start_kafka, start_mosquitto
from gesscale.brokers.process import free_port, port_answers, spawn
from gesscale.errors import UserError
from tests.fixtures.kafka import KAFKA_PORTS, MQTT_PORTS, scratch_dir


def test_kafka_starts_answers_and_stops(tmp_path: Path) -> None:
    port = free_port(*KAFKA_PORTS)
    with start_kafka(port, tmp_path / "kafka") as broker:
        assert broker.bootstrap == f"127.0.0.1:{port}"
        assert broker.alive()
        assert port_answers(port)
    assert not broker.alive()
    assert not port_answers(port)
    broker.stop()  # idempotent


def test_taken_port_is_a_user_error(tmp_path: Path) -> None:
    port = free_port(*KAFKA_PORTS)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(UserError, match="already taken"):
            start_kafka(port, tmp_path / "kafka")


def test_missing_binary_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="binary not found"):
        spawn([str(tmp_path / "no-such-broker")], tmp_path / "log")


def test_unknown_kafka_impl_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown Kafka broker"):
        start_kafka(free_port(*KAFKA_PORTS), tmp_path, impl="zookeeper")


def test_mosquitto_starts_saves_and_stops() -> None:
    scratch = scratch_dir("gesscale-test-mqtt-")
    try:
        port = free_port(*MQTT_PORTS)
        with start_mosquitto(port, scratch / "mqtt") as broker:
            assert broker.alive() and port_answers(port)
        assert not broker.alive()
        log = (scratch / "mqtt" / "mosquitto.log").read_text()
        assert "Error" not in log, log
        assert (scratch / "mqtt" / "mosquitto.db").exists()  # persistence written on shutdown
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's mosquitto drops to the mosquitto user")
def test_mosquitto_unreachable_data_dir_is_a_user_error(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(UserError, match="cannot enter"):
        start_mosquitto(free_port(*MQTT_PORTS), private / "mqtt")
