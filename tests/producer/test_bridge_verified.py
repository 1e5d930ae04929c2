"""The MQTT→Kafka bridge verifies the Kafka topic by key at the end of its run: a Kafka broker killed with SIGKILL
and restarted 0.3 s later loses what it had acknowledged, and the bridge restores it (0 lost), or gives up on
a Kafka that stays away with a non-zero verdict."""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from gesscale.brokers import KafkaBroker, start_kafka
from gesscale.brokers.topics import ensure_topic, read_values
from gesscale.process import free_port
from producer.bridge import Bridge
from producer.run import ProduceOptions, produce
from tests.fixtures.kafka import KAFKA_PORTS, scratch_dir


@pytest.fixture
def own_kafka() -> Iterator[KafkaBroker]:
    scratch = scratch_dir("gesscale-bridge-verify-")
    broker = start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka")
    try:
        ensure_topic(broker.bootstrap, "rides", 2)
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def crash(broker: KafkaBroker) -> None:
    broker.kill()
    time.sleep(0.3)
    broker.restart()


def keys_in(broker: KafkaBroker) -> Counter[str]:
    """Occurrences of each record key in the topic (the test's own count)."""
    return Counter(json.loads(value)["key"] for _, _, value in read_values(broker.bootstrap, "rides"))


def run_bridge(bridge: Bridge, **args) -> tuple[threading.Thread, threading.Event, dict]:
    stop, result = threading.Event(), {}
    thread = threading.Thread(target=lambda: result.update(stats=bridge.run(stop, **args)))
    thread.start()
    assert bridge._connected.wait(15), "bridge did not connect to MQTT"
    return thread, stop, result


def publish(mqtt_broker, topic: str, rate: int, seconds: int) -> int:
    opts = ProduceOptions(rate=rate, duration_s=seconds, duplication=1, mqtt=f"{mqtt_broker.host}:{mqtt_broker.port}",
                          mqtt_topic=topic, qos=1, confirm=False)  # fmt: skip
    stats = produce(opts, lambda m: None).stats
    assert stats.sent == stats.acked == rate * seconds
    return stats.sent


@pytest.mark.e2e
@pytest.mark.parametrize("when", ["after the last ack", "at a random moment"])
def test_kafka_killed_and_restarted_fast_loses_nothing(mqtt_broker, own_kafka: KafkaBroker, when: str) -> None:
    mqtt_topic = f"rides/{uuid.uuid4().hex[:8]}"
    notes: list[str] = []
    after_crash: list[int] = []
    bridge = Bridge(mqtt_broker.host, mqtt_broker.port, [mqtt_topic], own_kafka.bootstrap, "rides", notes.append,
                    client_id=f"verify-{uuid.uuid4().hex[:8]}")  # fmt: skip
    if when == "after the last ack":  # the run ends at its 8000th forward: then kill -9, before the verification
        verify = bridge._verify

        def crash_then_verify(timeout_s: float):
            crash(own_kafka)
            after_crash.append(len(keys_in(own_kafka)))  # the test's own count of what the crash left
            return verify(timeout_s)

        bridge._verify = crash_then_verify  # type: ignore[method-assign]
        ending = {"max_messages": 8000}
    else:
        moment = random.uniform(0.5, 3.0)
        threading.Thread(target=lambda: (time.sleep(moment), crash(own_kafka))).start()
        ending = {"idle_exit_s": 3.0}
    thread, stop, result = run_bridge(bridge, give_up_after_s=30, **ending)
    try:
        sent = publish(mqtt_broker, mqtt_topic, 2000, 4)
        thread.join(timeout=180)
    finally:
        stop.set()
        thread.join()
    v = result["stats"].verification
    counts = keys_in(own_kafka)
    assert v is not None and v.ok and v.lost == 0, (v, notes)
    assert set(counts) == {f"s{i}-0" for i in range(1, sent + 1)}
    assert sum(counts.values()) - len(counts) == v.duplicated
    if when == "after the last ack":
        assert v.restored == sent - after_crash[0]  # exactly what the crash lost was found and re-sent
    print(f"bridge, Kafka kill -9 {when}: {v.restored} re-sent after read-back, {v.duplicated} duplicated, 0 lost")


@pytest.mark.e2e
def test_bridge_gives_up_on_a_kafka_that_stays_away(mqtt_broker, own_kafka: KafkaBroker) -> None:
    mqtt_topic = f"rides/{uuid.uuid4().hex[:8]}"
    bridge = Bridge(mqtt_broker.host, mqtt_broker.port, [mqtt_topic], own_kafka.bootstrap, "rides", lambda m: None,
                    client_id=f"giveup-{uuid.uuid4().hex[:8]}")  # fmt: skip
    own_kafka.kill()
    thread, stop, result = run_bridge(bridge, give_up_after_s=3)
    start = time.monotonic()
    try:
        publish(mqtt_broker, mqtt_topic, 100, 2)
        thread.join(timeout=90)
    finally:
        stop.set()
        thread.join()
    stats = result["stats"]
    assert stats.gave_up and stats.forwarded == 0 and stats.mqtt_acked == 0 and stats.verification is None
    assert time.monotonic() - start < 60
