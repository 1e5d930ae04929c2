"""MQTT → Kafka bridge with at-least-once delivery: an MQTT message is acknowledged only after Kafka acked it.

The bridge subscribes with QoS 1 on a persistent session (fixed client id, clean_session=False) and manual
acknowledgements. Each message is sent to Kafka; the PUBACK goes back to the MQTT broker from the Kafka
success callback. A Kafka failure keeps the message un-acknowledged and retries it with backoff; if the bridge
dies, the broker re-delivers whatever was not acknowledged when the bridge reconnects. Duplicates are possible
(at-least-once), losses are not. A message whose record id Kafka already acknowledged from this bridge (a
producer publishing again what the MQTT broker may have lost, `producer.mqtt_sink`) is acknowledged without
forwarding it a second time and counted (`deduplicated`); the end verification still checks that record.

The bridge subscribes to `producer.handshake.PING_TOPIC` in the same SUBSCRIBE as its data filters and answers
a producer's ping when one of its filters covers the producer's topic: a producer publishes again after a broker
restart only once a bridge is subscribed again.

A Kafka acknowledgement is not trusted alone (the embedded broker loses what it acknowledged since its last save
when killed, producer.audit): the bridge keeps what it forwarded and, at the end of its run, reads the Kafka
topic back, re-sends what is missing and reports the verdict. A Kafka broker that stays away longer than
`give_up_after_s` ends the run (its messages stay un-acknowledged in MQTT, nothing is lost).
"""

from __future__ import annotations

import collections
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gesscale.errors import UserError
from producer.audit import Ledger, Verification, verify_run
from producer.handshake import PING_TOPIC, parse_ping, pong_payload
from producer.sinks import Backoff, Notify, close_producer
from producer.verify import record_id


@dataclass
class BridgeStats:
    """Counters of a bridge run."""

    received: int = 0
    forwarded: int = 0
    kafka_failures: int = 0
    mqtt_acked: int = 0
    redelivered: int = 0  # received with MQTT's DUP flag: sent before, maybe forwarded by an earlier bridge
    deduplicated: int = 0  # received again after Kafka acknowledged the record from this bridge: not forwarded
    pings: int = 0  # producers' questions answered (producer.handshake)
    elapsed_s: float = 0.0
    gave_up: bool = False
    verification: Verification | None = None


def kafka_key(payload: bytes, field: str | None) -> bytes | None:
    """The Kafka message key: `field` of a JSON object payload (as UTF-8), else None (round-robin)."""
    if not field or not payload.startswith(b"{"):
        return None
    try:
        value = json.loads(payload).get(field)
    except (ValueError, AttributeError):
        return None
    return None if value is None else str(value).encode()


class Bridge:
    """Forward MQTT topics to one Kafka topic, acknowledging MQTT only after Kafka acknowledged."""

    def __init__(self, mqtt_host: str, mqtt_port: int, topics: list[str], kafka_bootstrap: str, kafka_topic: str,
                 notify: Notify, *, key_field: str | None = "ride_id", client_id: str = "gesscale-bridge",
                 keepalive_s: int = 30, mqtt_configure: Callable[[Any], None] | None = None,
                 kafka_config: dict[str, Any] | None = None) -> None:  # fmt: skip
        import paho.mqtt.client as mqtt
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        if not topics:
            raise UserError("the bridge needs at least one MQTT topic")
        self.topics, self.kafka_topic, self.key_field, self.notify = topics, kafka_topic, key_field, notify
        self.stats = BridgeStats()
        self._lock = threading.Lock()
        self._retry: collections.deque = collections.deque()
        self._backoff = Backoff()
        self._pending = 0
        self._down_since: float | None = None  # first Kafka failure since the last delivery
        self.ledger = Ledger()  # what was forwarded, for the end verification
        self._delivered_ids: set[bytes] = set()  # producer record ids Kafka acknowledged in this run
        self.client_id = client_id
        from gesscale.brokers.security import kafka_client_config

        self.kafka_bootstrap = kafka_bootstrap
        self.kafka_config = kafka_client_config() if kafka_config is None else kafka_config
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=kafka_bootstrap, client_id=client_id, acks="all", linger_ms=2,
                enable_idempotence=False,  # see producer.sinks.KafkaSink: noida-db forgets producer state
                delivery_timeout_ms=30_000, request_timeout_ms=10_000, max_block_ms=2_000,
                reconnect_backoff_ms=200, reconnect_backoff_max_ms=5_000, bootstrap_timeout_ms=10_000,
                **self.kafka_config,
            )  # fmt: skip
        except KafkaError as err:
            raise UserError(f"cannot reach Kafka at {kafka_bootstrap}: {err}") from None
        self._client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False, manual_ack=True
        )
        if mqtt_configure is not None:
            mqtt_configure(self._client)
        self._topic_matches = mqtt.topic_matches_sub
        self._client.max_inflight_messages_set(1000)
        self._client.reconnect_delay_set(min_delay=1, max_delay=10)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = self._on_message
        self._connected = threading.Event()
        self._connack = threading.Event()  # the first answer to CONNECT, accepted or refused
        self._refused: str | None = None
        self._mqtt_address = f"{mqtt_host}:{mqtt_port}"
        self._closing = False
        try:
            self._client.connect(mqtt_host, mqtt_port, keepalive=keepalive_s)
        except OSError as err:
            self._producer.close(timeout=1)
            raise UserError(f"cannot reach MQTT broker at {mqtt_host}:{mqtt_port}: "
                            f"{getattr(err, 'strerror', None) or err}") from None  # fmt: skip

    # paho network thread ------------------------------------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            if self._connack.is_set():  # refused on a reconnection: say so and let paho retry
                self.notify(f"MQTT connection refused: {reason_code}")
            else:  # refused at once: `run` ends with one error line
                self._refused = str(reason_code)
                self._connack.set()
            return
        self._connack.set()
        # one SUBSCRIBE: a pong proves the data filters are in place too (producer.handshake)
        client.subscribe([(t, 1) for t in self.topics] + [(PING_TOPIC, 1)])
        self._connected.set()
        self.notify(f"MQTT connected, subscribed to {', '.join(self.topics)} (QoS 1)")

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        was_connected = self._connected.is_set()
        self._connected.clear()
        # a refused CONNECT is followed by a disconnect too: only a lost session is news (the refusal is reported
        # by `run` or by `_on_connect`)
        if was_connected and not self._closing:
            self.notify(f"MQTT disconnected ({reason_code}); un-acknowledged messages will be re-delivered")

    def _on_message(self, client, userdata, msg) -> None:
        if msg.topic == PING_TOPIC:
            self._answer(client, msg)
            return
        rid = record_id(msg.payload)  # only producer records are recognised again: other payloads may repeat
        with self._lock:
            self.stats.received += 1
            self.stats.redelivered += bool(msg.dup)
            again = rid is not None and rid in self._delivered_ids
            self.stats.deduplicated += again
            if not again:
                self._pending += 1
        if again:  # Kafka acknowledged this record from this bridge before (module docstring)
            if msg.qos > 0:
                client.ack(msg.mid, msg.qos)
            return
        self._forward(msg.mid, msg.qos, kafka_key(msg.payload, self.key_field), msg.payload)

    def _answer(self, client, msg) -> None:
        """A producer asks whether a bridge covers its topic: answer when one of our filters does."""
        ping = parse_ping(msg.payload)
        if ping is not None and any(self._topic_matches(f, ping[0]) for f in self.topics):
            client.publish(ping[1], pong_payload(ping[2], self.client_id), qos=1)
            with self._lock:
                self.stats.pings += 1
        if msg.qos > 0:
            client.ack(msg.mid, msg.qos)

    # forwarding (paho thread, kafka sender thread, main loop) -----------------------------------------------
    def _forward(self, mid: int, qos: int, key: bytes | None, value: bytes) -> None:
        from kafka.errors import KafkaError

        with self._lock:
            self.ledger.add(key, value)
        try:
            future = self._producer.send(self.kafka_topic, key=key, value=value)
        except KafkaError:
            self._failed(mid, qos, key, value)
            return
        future.add_callback(lambda _meta: self._delivered(mid, qos, value))
        future.add_errback(lambda _exc: self._failed(mid, qos, key, value))

    def _delivered(self, mid: int, qos: int, value: bytes) -> None:
        if qos > 0:
            self._client.ack(mid, qos)
        rid = record_id(value)
        with self._lock:
            if rid is not None:
                self._delivered_ids.add(rid)
            self.stats.forwarded += 1
            self.stats.mqtt_acked += qos > 0
            self._pending -= 1
            self._down_since = None

    def _failed(self, mid: int, qos: int, key: bytes | None, value: bytes) -> None:
        with self._lock:
            self.stats.kafka_failures += 1
            self._retry.append((mid, qos, key, value))
            if self._down_since is None:
                self._down_since = time.monotonic()
            if self._backoff.ready(time.monotonic()):
                wait = self._backoff.failed(time.monotonic())
                self.notify(f"Kafka send failed; {len(self._retry)} message(s) held, retry in {wait:.1f} s")

    def _retry_due(self) -> None:
        with self._lock:
            if not self._retry or not self._backoff.ready(time.monotonic()):
                return
            batch = list(self._retry)
            self._retry.clear()
        for item in batch:
            self._forward(*item)

    def pending(self) -> int:
        """Messages received but not yet forwarded and acknowledged."""
        with self._lock:
            return self._pending

    def run(
        self,
        stop: threading.Event,
        *,
        idle_exit_s: float | None = None,
        max_messages: int | None = None,
        progress: Callable[[BridgeStats], None] | None = None,
        drain_timeout_s: float = 30.0,
        give_up_after_s: float | None = None,
        verify_timeout_s: float = 120.0,
    ) -> BridgeStats:
        """Forward until `stop` is set, `max_messages` were forwarded, nothing arrived for `idle_exit_s`, or Kafka
        failed for longer than `give_up_after_s`; then drain and verify the Kafka topic (module docstring)."""
        start = last_count_change = time.monotonic()
        last_received = -1
        self._client.loop_start()
        try:
            self._await_connack()
            while not stop.is_set():
                time.sleep(0.05)
                self._retry_due()
                now = time.monotonic()
                with self._lock:
                    self.stats.elapsed_s = now - start
                    received, forwarded = self.stats.received, self.stats.forwarded
                if received != last_received:
                    last_received, last_count_change = received, now
                if progress is not None:
                    progress(self.stats)
                if max_messages is not None and forwarded >= max_messages:
                    break
                if idle_exit_s is not None and now - last_count_change >= idle_exit_s and self.pending() == 0:
                    break
                if self._gave_up(now, give_up_after_s):
                    break
            if not self.stats.gave_up:
                self._drain(timeout_s=drain_timeout_s)
            if self.pending() == 0 and not self.stats.gave_up:
                self.stats.verification = self._verify(verify_timeout_s)
        finally:
            self._closing = True
            self._client.disconnect()
            self._client.loop_stop()
            close_producer(self._producer, 5.0)  # Kafka unreachable: its records stay un-acked in MQTT
        self.stats.elapsed_s = time.monotonic() - start
        return self.stats

    def _await_connack(self, timeout_s: float = 15.0) -> None:
        """A refused first connection (bad credentials, not authorised) is one clear error, not a retry loop."""
        if not self._connack.wait(timeout_s):
            raise UserError(f"MQTT broker at {self._mqtt_address} did not accept the connection within "
                            f"{timeout_s:.0f} s (TLS or protocol mismatch?)")  # fmt: skip
        if self._refused is not None:
            raise UserError(f"MQTT broker at {self._mqtt_address} refused the connection: {self._refused}")

    def _gave_up(self, now: float, give_up_after_s: float | None) -> bool:
        with self._lock:
            down = self._down_since
        if give_up_after_s is None or down is None or now - down <= give_up_after_s:
            return False
        self.stats.gave_up = True
        self.notify(f"Kafka unreachable for more than {give_up_after_s:g} s: giving up; un-acknowledged messages "
                    "stay in the MQTT broker for the next bridge with this client id")  # fmt: skip
        return True

    def _verify(self, timeout_s: float) -> Verification:
        """Read the Kafka topic back and re-send what it lacks of what this run forwarded (producer.audit)."""
        from kafka.errors import KafkaError

        def resend(records: list[tuple[bytes | None, bytes]]) -> None:
            for key, value in records:
                with contextlib.suppress(KafkaError):
                    self._producer.send(self.kafka_topic, key=key, value=value)
            with contextlib.suppress(KafkaError):
                self._producer.flush(timeout=max(1.0, timeout_s / 3))

        return verify_run(self.ledger, self.kafka_bootstrap, self.kafka_topic, resend, self.notify, timeout_s,
                          client_config=self.kafka_config)

    def _drain(self, timeout_s: float) -> None:
        """Let in-flight messages reach Kafka (and their PUBACKs leave) before disconnecting."""
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout_s
        while self.pending() and time.monotonic() < deadline:
            with contextlib.suppress(KafkaError):  # not flushed within 1 s: keep waiting
                self._producer.flush(timeout=1)
            self._retry_due()
            time.sleep(0.05)
        time.sleep(0.2)  # let paho's thread write the last PUBACKs
