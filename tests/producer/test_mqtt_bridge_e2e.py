"""MQTT path: producer → mosquitto (QoS 1) → bridge → Kafka, none missing; the bridge acks only after Kafka."""

from __future__ import annotations

import json
import shutil
import threading
import uuid

import paho.mqtt.client as mqtt
import pytest

from gesscale.brokers import start_kafka
from gesscale.brokers.topics import ensure_topic, read_values
from gesscale.process import free_port
from producer.bridge import Bridge, kafka_key
from producer.run import ProduceOptions, produce
from tests.fixtures.kafka import KAFKA_PORTS, scratch_dir


def _keys(bootstrap: str, topic: str) -> list[str]:
    return [json.loads(value)["key"] for _, _, value in read_values(bootstrap, topic)]


def _start_bridge(bridge: Bridge, **run_args) -> tuple[threading.Thread, threading.Event, dict]:
    stop, result = threading.Event(), {}

    def run() -> None:
        try:
            result["stats"] = bridge.run(stop, **run_args)
        except BaseException as err:  # surfaced by the test's assertion on result
            result["error"] = err
            raise

    thread = threading.Thread(target=run)
    thread.start()
    assert bridge._connected.wait(15), "bridge did not connect to MQTT"
    return thread, stop, result


def test_kafka_key_from_json_payload() -> None:
    assert kafka_key(b'{"ride_id": "17", "key": "17-0"}', "ride_id") == b"17"
    assert kafka_key(b"not json", "ride_id") is None
    assert kafka_key(b'{"other": 1}', "ride_id") is None
    assert kafka_key(b'{"ride_id": 3}', None) is None


@pytest.mark.e2e
def test_20000_messages_at_qos1_arrive_in_kafka(mqtt_broker, kafka_bootstrap: str, kafka_topic_factory,
                                                tmp_path) -> None:  # fmt: skip
    topic = kafka_topic_factory(partitions=4, prefix="bridge")
    mqtt_topic = f"rides/{uuid.uuid4().hex[:8]}"
    notes: list[str] = []
    bridge = Bridge(mqtt_broker.host, mqtt_broker.port, [mqtt_topic], kafka_bootstrap, topic, notes.append,
                    client_id=f"test-bridge-{uuid.uuid4().hex[:8]}")  # fmt: skip
    thread, stop, result = _start_bridge(bridge, max_messages=20_000)
    try:
        opts = ProduceOptions(rate=5000, duration_s=4, duplication=1, mqtt=f"{mqtt_broker.host}:{mqtt_broker.port}",
                              mqtt_topic=mqtt_topic, qos=1, kafka=kafka_bootstrap, topic=topic,
                              outbox=tmp_path / "outbox.sqlite")  # fmt: skip
        sent = produce(opts, notes.append).stats
        thread.join(timeout=120)
    finally:
        stop.set()
        thread.join()
    assert sent.sent == sent.acked == 20_000
    assert sent.verification is not None and sent.verification.ok and sent.verification.found == 20_000
    assert not (tmp_path / "outbox.sqlite").exists()  # every record confirmed: the outbox is gone
    stats = result["stats"]
    assert stats.forwarded == stats.mqtt_acked == 20_000
    keys = _keys(kafka_bootstrap, topic)
    assert set(keys) == {f"s{i}-0" for i in range(1, 20_001)}, f"{20_000 - len(set(keys))} missing"
    print(f"MQTT path: 20000 published at QoS 1, {len(keys)} in Kafka ({len(set(keys))} distinct), "
          f"bridge ran {stats.elapsed_s:.1f} s (from before the first publish to the last ack)")  # fmt: skip


@pytest.mark.e2e
def test_bridge_acks_only_after_kafka(mqtt_broker) -> None:
    """Kafka down while messages arrive: the bridge cannot forward, so it must not ack. A new bridge with the
    same client id gets them re-delivered by mosquitto once Kafka is back, and all of them reach Kafka."""
    scratch = scratch_dir("gesscale-bridge-")
    kafka = start_kafka(free_port(*KAFKA_PORTS), scratch / "kafka")
    client_id = f"test-bridge-{uuid.uuid4().hex[:8]}"
    mqtt_topic = f"held/{uuid.uuid4().hex[:8]}"
    notes: list[str] = []
    try:
        ensure_topic(kafka.bootstrap, "held", 1)
        first = Bridge(mqtt_broker.host, mqtt_broker.port, [mqtt_topic], kafka.bootstrap, "held", notes.append,
                       client_id=client_id)  # fmt: skip
        thread, stop, result = _start_bridge(first, drain_timeout_s=1)
        kafka.stop()
        publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pub-{client_id}")
        publisher.connect(mqtt_broker.host, mqtt_broker.port)
        publisher.loop_start()
        infos = [publisher.publish(mqtt_topic, json.dumps({"ride_id": str(i), "key": f"{i}-0"}), qos=1)
                 for i in range(500)]  # fmt: skip
        for info in infos:
            info.wait_for_publish(timeout=10)
        publisher.disconnect()
        publisher.loop_stop()
        stop.set()
        thread.join()
        assert "error" not in result, repr(result.get("error"))
        held = result["stats"]
        assert held.received == 500 and held.forwarded == 0 and held.mqtt_acked == 0

        kafka.restart()
        second = Bridge(mqtt_broker.host, mqtt_broker.port, [mqtt_topic], kafka.bootstrap, "held", notes.append,
                        client_id=client_id)  # fmt: skip
        thread, stop, result = _start_bridge(second, max_messages=500)
        thread.join(timeout=60)
        stop.set()
        thread.join()
        assert result["stats"].forwarded == 500
        assert sorted(int(k.split("-")[0]) for k in set(_keys(kafka.bootstrap, "held"))) == list(range(500))
    finally:
        kafka.stop()
        shutil.rmtree(scratch, ignore_errors=True)
