"""Broker management from code: start, answer, stop; clear errors for a taken port or a missing binary."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from gesscale.brokers import start_kafka, start_mosquitto
from gesscale.errors import UserError
from gesscale.process import free_port, port_answers, spawn
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


# A server whose main thread ends first on SIGTERM (its memory released: /proc/PID/cmdline reads empty) while
# another thread keeps the listening socket open for LINGER_S more: what a multi-threaded broker does on a
# loaded machine, made slow enough to see.
LINGERING_SERVER = """
import ctypes, os, signal, socket, sys, threading, time
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen()
stopping = threading.Event()
def linger():
    stopping.wait()
    time.sleep(float(sys.argv[2]))
    os._exit(0)
threading.Thread(target=linger).start()
def on_term(*_):
    stopping.set()
    ctypes.CDLL(None).pthread_exit(None)
signal.signal(signal.SIGTERM, on_term)
while True:
    time.sleep(0.1)
"""


def test_stop_by_pid_waits_for_every_thread(tmp_path: Path) -> None:
    """`broker down` knows a broker by PID and argv only: it must wait until the port is closed, not until the
    main thread is gone (the cause of a CI failure: the port answered right after a failed `broker up`)."""
    import sys
    import time

    from gesscale.process import ManagedProcess, wait_until_listening

    script = tmp_path / "server.py"
    script.write_text(LINGERING_SERVER)
    port = free_port(*KAFKA_PORTS)
    started = spawn([sys.executable, str(script), str(port), "1.0"], tmp_path / "server.log")
    wait_until_listening(started, port, "test server")
    by_pid = ManagedProcess(pid=started.pid, argv=started.argv, log_path=started.log_path)
    t0 = time.monotonic()
    by_pid.stop()
    took = time.monotonic() - t0
    assert not port_answers(port), f"stop() returned after {took:.2f} s with the port still open"
    assert not by_pid.alive()
    started.stop()  # reaps the child of this test process; idempotent
