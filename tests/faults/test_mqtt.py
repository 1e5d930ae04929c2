"""The MQTT side, while `gesscale produce --mqtt --qos 1` publishes and `gesscale bridge` forwards to Kafka:

- the bridge killed with `kill -9`, a new one with the same client id takes over;
- mosquitto killed with `kill -9` at a seeded moment 0.5-6 s into the run, back 0.3 s later on its data directory
  (many moments fall before its first autosave of the run: its queues are then not on disk);
- mosquitto's port dropped (iptables) and mosquitto killed behind it, so that the clients notice only by their
  keepalive, back later;
- the producer and mosquitto killed together, then the same command with `--resume`.

The sink is the Kafka topic, counted by key: 0 lost every time, duplicates only as many as the tools reported.
`GESSCALE_MQTT_RUNS=N` repeats the mosquitto kill N times with seeds `GESSCALE_FAULT_SEED`, +1, ... (the 20-run
acceptance); CI runs it once.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gesscale.brokers import KafkaBroker
from gesscale.brokers.mqtt import MqttBroker, start_mosquitto
from gesscale.process import free_port
from tests.faults.support import Fault, fault, key_counts, synthetic_keys, tally

RATE, SECONDS = 1500, 5
RUNS = int(os.environ.get("GESSCALE_MQTT_RUNS", "1"))


@pytest.fixture
def mosquitto(request: pytest.FixtureRequest) -> Iterator[MqttBroker]:
    """A mosquitto of the test's own (it gets killed); autosave every 5 s, or as the test's `autosave` parameter
    says."""
    from tests.fixtures.kafka import scratch_dir

    scratch = scratch_dir("gesscale-mqtt-fault-")
    autosave = getattr(request, "param", 5)
    broker = start_mosquitto(free_port(18900, 18999), scratch / "mqtt", autosave_interval_s=autosave)
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _gesscale(args: list[str], log: Path) -> subprocess.Popen:
    with log.open("ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "gesscale", *args], stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _bridge(mqtt: MqttBroker, kafka: KafkaBroker, topic: str, client: str, out: Path,
            keepalive: int = 30) -> subprocess.Popen:  # fmt: skip
    return _gesscale(["bridge", "--mqtt", f"{mqtt.host}:{mqtt.port}", "--mqtt-topic", topic, "-b", kafka.bootstrap,
                      "-t", "rides", "--client-id", client, "--keepalive", str(keepalive), "--json", str(out)],
                     out.with_suffix(".log"))


def _producer_args(mqtt: MqttBroker, kafka: KafkaBroker, topic: str, tmp: Path, keepalive: int = 30,
                   seconds: int = SECONDS) -> list[str]:  # fmt: skip
    return ["produce", "--mqtt", f"{mqtt.host}:{mqtt.port}", "--mqtt-topic", topic, "--qos", "1", "--rate",
            str(RATE), "--duration", str(seconds), "--duplication", "1", "--give-up-after", "90", "-b",
            kafka.bootstrap, "-t", "rides", "--outbox", str(tmp / "outbox.sqlite"), "--keepalive", str(keepalive),
            "-q"]  # fmt: skip


def _producer(args: list[str], out: Path) -> subprocess.Popen:
    return _gesscale([*args, "--json", str(out)], out.with_suffix(".log"))


def _wait_publishing(producer: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    """Kill moments count from the first publication: the interpreter and the bridge handshake take a while."""
    deadline = time.monotonic() + timeout_s
    while "publishing" not in (log.read_text(errors="replace") if log.exists() else ""):
        assert producer.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.02)


def _wait_subscribed(bridge: subprocess.Popen, log: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while "subscribed" not in log.read_text(errors="replace"):
        assert bridge.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def _wait(proc: subprocess.Popen, timeout_s: float = 240) -> int:
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise


def _stop_bridge(bridge: subprocess.Popen) -> int:
    """The producer has confirmed everything in Kafka: end the bridge (it drains, verifies and reports)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(bridge.pid, signal.SIGTERM)
    return _wait(bridge)


def _logs(tmp: Path, *names: str) -> list[str]:
    return [(tmp / n).read_text(errors="replace")[-3000:] for n in names if (tmp / n).exists()]


def _restart(mosquitto: MqttBroker) -> None:
    restarted = start_mosquitto(mosquitto.port, mosquitto.data_dir, autosave_interval_s=mosquitto.autosave_interval_s)
    mosquitto.process = restarted.process  # the fixture stops the new one


def _check(tmp: Path, kafka: KafkaBroker, sent: int, codes: list[int], producer_json: str,
           bridge_json: str) -> tuple[int, int, dict, dict]:  # fmt: skip
    """The test's own count of the Kafka topic by key, and the tools' figures; asserts nothing was lost."""
    lost, duplicated = tally(key_counts(kafka.bootstrap, "rides"), synthetic_keys(sent, 1))
    summary = json.loads((tmp / producer_json).read_text())
    run = json.loads((tmp / bridge_json).read_text())
    assert codes == [0, 0], _logs(tmp, producer_json.replace(".json", ".log"), bridge_json.replace(".json", ".log"))
    v = summary["verification"]
    assert v["verified"] and v["found"] == v["expected"] == sent and v["lost"] == 0, summary
    assert lost == 0
    # every duplicate in Kafka is one a tool reported: the producer's verification counts them by key
    assert duplicated == v["duplicated"]
    return lost, duplicated, summary, run


def _reported(summary: dict, run: dict) -> str:
    v = summary["verification"]
    return (f"producer: {summary['acked']} acknowledged, {summary['resent_after_failure']} published again, confirmed "
            f"{v['found']} of {v['expected']} in Kafka, {v['duplicated']} duplicated there; bridge: "
            f"{run['deduplicated']} received again and not forwarded, {run['redelivered']} re-delivered by MQTT, "
            f"{run['pings']} pings answered")  # fmt: skip


@pytest.mark.e2e
def test_bridge_killed_then_taken_over_loses_nothing(mosquitto: MqttBroker, own_broker: KafkaBroker,
                                                      tmp_path: Path) -> None:
    f = fault("MQTT→Kafka bridge, then a new one with its client id")
    topic, client = f"rides/{uuid.uuid4().hex[:8]}", f"fault-{uuid.uuid4().hex[:8]}"
    first = _bridge(mosquitto, own_broker, topic, client, tmp_path / "bridge1.json")
    _wait_subscribed(first, tmp_path / "bridge1.log")
    producer = _producer(_producer_args(mosquitto, own_broker, topic, tmp_path), tmp_path / "produce.json")
    time.sleep(f.moment(2.0, 5.0))
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(30)
    second = _bridge(mosquitto, own_broker, topic, client, tmp_path / "bridge2.json")
    codes = [_wait(producer)]
    codes.append(_stop_bridge(second))
    sent = RATE * SECONDS
    lost, duplicated, summary, run = _check(tmp_path, own_broker, sent, codes, "produce.json", "bridge2.json")
    f.record(sent, lost, duplicated, _reported(summary, run))
    # at least once: what the killed bridge had forwarded but not acknowledged comes again, flagged by MQTT
    assert duplicated <= run["redelivered"] + run["verification"]["duplicated"]


# Runs alternate between Debian's default autosave of 1800 s (every kill before the first autosave: what the run
# published exists only in mosquitto's memory when it dies) and an autosave every 5 s (some kills after one).
_RUN_PARAMS = [pytest.param(run, 1800 if run % 2 == 0 else 5, id=f"{run}-autosave{1800 if run % 2 == 0 else 5}")
               for run in range(RUNS)]  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize(("run", "mosquitto"), _RUN_PARAMS, indirect=["mosquitto"])
def test_mosquitto_killed_and_restarted_loses_nothing(mosquitto: MqttBroker, own_broker: KafkaBroker,
                                                      tmp_path: Path, run: int) -> None:
    name = "mosquitto, back 0.3 s later"
    base = fault(name).seed
    f = Fault(name, base + run, random.Random(f"{base + run}:{name}"))
    topic, client = f"rides/{uuid.uuid4().hex[:8]}", f"fault-{uuid.uuid4().hex[:8]}"
    bridge = _bridge(mosquitto, own_broker, topic, client, tmp_path / "bridge.json")
    _wait_subscribed(bridge, tmp_path / "bridge.log")
    mosquitto.save()  # the bridge's subscription is on disk before the producer starts
    saved = mosquitto.saved_at()
    producer = _producer(_producer_args(mosquitto, own_broker, topic, tmp_path), tmp_path / "produce.json")
    _wait_publishing(producer, tmp_path / "produce.log")
    moment = f.moment(0.5, 6.0)
    time.sleep(moment)
    before_autosave = mosquitto.saved_at() == saved  # no autosave since the producer started
    mosquitto.process.kill()
    time.sleep(0.3)
    _restart(mosquitto)
    codes = [_wait(producer)]
    codes.append(_stop_bridge(bridge))
    sent = RATE * SECONDS
    lost, duplicated, summary, run_ = _check(tmp_path, own_broker, sent, codes, "produce.json", "bridge.json")
    f.record(sent, lost, duplicated, _reported(summary, run_))
    print(f"[mqtt-run] seed {f.seed} kill {moment:.2f} s {'before' if before_autosave else 'after'} the first "
          f"autosave: lost {lost}, duplicated {duplicated}", flush=True)


def _iptables() -> str | None:
    path = shutil.which("iptables")
    if path is None or os.geteuid() != 0:
        return None
    ok = subprocess.run([path, "-w", "-L", "INPUT", "-n"], capture_output=True).returncode == 0
    return path if ok else None


@contextlib.contextmanager
def _port_dropped(port: int) -> Iterator[Callable[[], None]]:
    """Every packet to or from `port` dropped (no RST, no FIN reaches anyone): a partition only keepalives notice.
    Yields a function that lifts it; lifted at the latest on exit."""
    iptables = _iptables()
    assert iptables is not None
    rules = [["INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
             ["INPUT", "-p", "tcp", "--sport", str(port), "-j", "DROP"]]  # fmt: skip
    for rule in rules:
        subprocess.run([iptables, "-w", "-I", *rule], check=True)
    lifted = []

    def lift() -> None:
        if not lifted:
            lifted.append(True)
            for rule in rules:
                subprocess.run([iptables, "-w", "-D", *rule], check=False)

    try:
        yield lift
    finally:
        lift()


@pytest.mark.e2e
@pytest.mark.skipif(_iptables() is None, reason="needs root and iptables to drop the broker's port")
def test_broker_lost_behind_a_partition_loses_nothing(mosquitto: MqttBroker, own_broker: KafkaBroker,
                                                      tmp_path: Path) -> None:
    """The broker's port is dropped, then mosquitto is killed behind it: the clients hear nothing (no RST) and
    notice only when their keepalive (5 s) expires; mosquitto comes back when the port is open again."""
    f = fault("mosquitto lost behind a partition (keepalive)")
    keepalive = 5
    topic, client = f"rides/{uuid.uuid4().hex[:8]}", f"fault-{uuid.uuid4().hex[:8]}"
    bridge = _bridge(mosquitto, own_broker, topic, client, tmp_path / "bridge.json", keepalive=keepalive)
    _wait_subscribed(bridge, tmp_path / "bridge.log")
    mosquitto.save()
    producer = _producer(_producer_args(mosquitto, own_broker, topic, tmp_path, keepalive=keepalive),
                         tmp_path / "produce.json")  # fmt: skip
    _wait_publishing(producer, tmp_path / "produce.log")
    time.sleep(f.moment(1.0, 4.0))
    with _port_dropped(mosquitto.port) as lift:
        mosquitto.process.kill()
        time.sleep(2 * keepalive + 2)  # paho gives up after a keepalive without traffic plus one without PINGRESP
        lift()
        _restart(mosquitto)
    codes = [_wait(producer)]
    codes.append(_stop_bridge(bridge))
    sent = RATE * SECONDS
    lost, duplicated, summary, run = _check(tmp_path, own_broker, sent, codes, "produce.json", "bridge.json")
    f.record(sent, lost, duplicated, _reported(summary, run))
    assert "keep" in (tmp_path / "produce.log").read_text().lower()  # the producer noticed by its keepalive


@pytest.mark.e2e
def test_producer_and_broker_killed_together_then_resume_delivers_all(mosquitto: MqttBroker, own_broker: KafkaBroker,
                                                                      tmp_path: Path) -> None:
    """kill -9 of the producer and mosquitto at one moment; mosquitto back 0.3 s later; the same producer command
    with --resume (same client id: its session and outbox) delivers every record."""
    f = fault("producer and mosquitto together, then --resume")
    topic, client = f"rides/{uuid.uuid4().hex[:8]}", f"fault-{uuid.uuid4().hex[:8]}"
    bridge = _bridge(mosquitto, own_broker, topic, client, tmp_path / "bridge.json")
    _wait_subscribed(bridge, tmp_path / "bridge.log")
    mosquitto.save()
    args = _producer_args(mosquitto, own_broker, topic, tmp_path)
    first = _producer(args, tmp_path / "first.json")
    _wait_publishing(first, tmp_path / "first.log")
    time.sleep(f.moment(0.5, 4.0))
    os.killpg(first.pid, signal.SIGKILL)
    mosquitto.process.kill()
    first.wait(30)
    time.sleep(0.3)
    _restart(mosquitto)
    second = _producer([*args, "--resume"], tmp_path / "produce.json")
    codes = [_wait(second)]
    codes.append(_stop_bridge(bridge))
    sent = RATE * SECONDS
    lost, duplicated, summary, run = _check(tmp_path, own_broker, sent, codes, "produce.json", "bridge.json")
    f.record(sent, lost, duplicated, f"--resume skipped {summary['resumed_skipped']}; " + _reported(summary, run))
    assert 0 < summary["resumed_skipped"] < sent, "the kill did not land mid-run"

