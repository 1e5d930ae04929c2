"""The producer's MQTT sink (paho-mqtt 2.x): QoS 0 or 1 to one topic, with nothing acknowledged ever lost.

A PUBACK from mosquitto is not durable (it saves snapshots, `producer.outbox`), so at QoS 1 with a confirmation
target (the Kafka topic the bridge writes to) the sink works end to end:

- every record goes into a durable outbox (on disk, by key) before it is published: records are written in
  batches and a batch is published once written, so a kill -9 cannot leave a record in Kafka that the
  outbox never held (a `--resume`d run then verifies every record of the plan);
- the client id is fixed by the caller (derived from the run), so a restarted producer resumes its session and
  finds its outbox;
- before the first publication, and after every lost connection before publishing again, it waits until a
  bridge answers that it is subscribed to the topic (`producer.handshake`): what reaches mosquitto before a
  bridge has subscribed again would be acknowledged and dropped;
- after every lost connection it publishes again every record not yet seen in the Kafka topic (read back by
  key first), however long ago it was acknowledged: not a window of the last seconds;
- at the end (`verify`) it reads the Kafka topic back by key until every record of the outbox is there,
  dropping each found one from the outbox, and publishes again what stays missing once the topic stopped
  growing. A record leaves the outbox only when found there.

Without a confirmation target (`confirm=None`) it only counts PUBACKs, as MQTT alone cannot promise more.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gesscale.errors import UserError
from producer.audit import READ_BACK_MARGIN_S, Verification, identity
from producer.handshake import PING_TOPIC, parse_pong, ping_payload, pong_topic
from producer.outbox import Outbox
from producer.sinks import Notify, OutageTracker

PING_EVERY_S = 2.0  # ping again when no bridge answered within this long
SETTLE_S = 5.0  # at the end: publish again what is missing once the topic has not grown for this long


@dataclass
class KafkaConfirm:
    """Where the bridge writes: the producer reads it back by key to confirm records end to end."""

    bootstrap: str
    topic: str
    client_config: dict[str, Any] | None = None  # kafka-python TLS/SASL settings; None: the environment's

    def held(self, since_ms: int) -> Counter[bytes]:
        """Occurrences of each record id in the topic from `since_ms` on (KafkaError when unreadable)."""
        from gesscale.brokers.topics import read_values

        return Counter(identity(value) for _, _, value in read_values(
            self.bootstrap, self.topic, settle_s=0.5, since_ms=since_ms, client_config=self.client_config))


@dataclass
class MqttEndpoint:
    """How to reach the MQTT broker: address, keepalive, and TLS and credentials (gesscale.brokers.security)."""

    host: str
    port: int
    keepalive_s: int = 30
    configure: Callable[[Any], None] | None = None  # applies TLS and credentials (gesscale.brokers.security)


class MqttSink:
    """MQTT through paho-mqtt 2.x; see the module docstring for what happens around a broker loss."""

    def __init__(self, endpoint: MqttEndpoint, topic: str, qos: int, notify: Notify, client_id: str, *,
                 outbox: Outbox | None = None, confirm: KafkaConfirm | None = None,
                 bridge_wait_s: float = 120.0) -> None:  # fmt: skip
        import paho.mqtt.client as mqtt

        if qos not in (0, 1):
            raise UserError(f"MQTT QoS must be 0 or 1, got {qos}")
        if confirm is not None and (qos != 1 or outbox is None):
            raise UserError("end-to-end confirmation needs QoS 1 and an outbox")
        self.topic, self.qos, self.notify, self.client_id = topic, qos, notify, client_id
        self.outbox, self.confirm = outbox, confirm
        self._mqtt = mqtt
        self._client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False, reconnect_on_failure=True
        )
        if endpoint.configure is not None:
            endpoint.configure(self._client)
        self._client.max_inflight_messages_set(1000)
        self._client.max_queued_messages_set(0)
        self._client.reconnect_delay_set(min_delay=1, max_delay=10)
        self._outage = OutageTracker(notify, f"MQTT {endpoint.host}:{endpoint.port}")
        # Everything the callbacks touch exists before connecting: paho's thread may call them at once.
        self._unpublished: list[bytes] = []  # handed over, in the outbox's buffer, not yet published
        self._inflight: collections.deque = collections.deque()  # (message info, is a re-publication)
        self._ids: set[bytes] = set()  # every record id of this run (for the end figures)
        self._seen: set[bytes] = set()  # ids read back in the topic during the run (not re-published)
        self._republish_due = confirm is not None and outbox is not None and outbox.count() > 0
        self._lost = threading.Event()  # set by paho's thread when the connection is lost
        self._ready = threading.Event()  # a bridge answered the latest ping since the last (re)connection
        self._nonce = 0
        self._ping_at = -PING_EVERY_S
        self._bridge_wait_s = bridge_wait_s
        self._waiting_since: float | None = None
        # PUBACKs by message id, from paho's thread: `MQTTMessageInfo.is_published()` raises for a message
        # published while disconnected (rc NO_CONN), although paho keeps it and sends it after reconnecting.
        self._puback: collections.Counter[int] = collections.Counter()
        self._puback_lock = threading.Lock()
        self.acked = 0
        self.resent = 0
        self.restored = 0
        self.dropped = 0
        self._closing = False
        self._refused: str | None = None
        self._connected = threading.Event()
        self._client.on_disconnect = self._on_disconnect
        self._client.on_connect = self._on_connect
        self._client.on_publish = self._on_publish
        self._client.on_message = self._on_message
        try:
            self._client.connect(endpoint.host, endpoint.port, keepalive=endpoint.keepalive_s)
        except OSError as err:
            raise UserError(f"cannot reach MQTT broker at {endpoint.host}:{endpoint.port}: "
                            f"{getattr(err, 'strerror', None) or err}") from None  # fmt: skip
        self._client.loop_start()
        self._await_connected(endpoint)
        if confirm is not None:
            self._await_bridge(bridge_wait_s)
            notify(f"a bridge is subscribed to MQTT topic {topic}: publishing")

    # paho's network thread ----------------------------------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._refused = str(reason_code)
            self._connected.set()
            return
        self._ready.clear()
        if self.confirm is not None:
            client.subscribe(pong_topic(self.client_id), qos=1)
            if self._lost.is_set():
                self._republish_due = True
        self._lost.clear()
        self._connected.set()
        self._outage.up(time.monotonic(), len(self._inflight))

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        # paho calls this after a refused CONNECT too: the refusal is one error line (`_await_connected`), not an
        # outage to retry (it printed "unreachable ... retrying" before the error when paho's thread came first)
        if not self._closing and self._refused is None:
            self._lost.set()
            self._ready.clear()
            self._outage.down(time.monotonic(), f"disconnected ({reason_code})")

    def _on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        with self._puback_lock:
            self._puback[mid] += 1

    def _on_message(self, client, userdata, msg) -> None:
        if msg.topic == pong_topic(self.client_id) and parse_pong(msg.payload) == self._nonce:
            self._ready.set()

    # set-up ---------------------------------------------------------------------------------------------------
    def _await_connected(self, endpoint: MqttEndpoint, timeout_s: float = 15.0) -> None:
        """The first CONNACK: a refused connection (bad credentials, not authorised) is one clear error."""
        if not self._connected.wait(timeout_s):
            self.close()
            raise UserError(f"MQTT broker at {endpoint.host}:{endpoint.port} did not accept the connection "
                            f"within {timeout_s:.0f} s (TLS or protocol mismatch?)")  # fmt: skip
        if self._refused is not None:
            self.close()
            raise UserError(f"MQTT broker at {endpoint.host}:{endpoint.port} refused the connection: {self._refused}")

    def _await_bridge(self, timeout_s: float) -> None:
        """Block until a bridge is subscribed to the topic (restart-safe ordering), or fail after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not self._bridge_ready(time.monotonic()):
            if time.monotonic() > deadline:
                self.close()
                raise UserError(f"no bridge answered for MQTT topic {self.topic} within {timeout_s:g} s: start "
                                "`gesscale bridge` first (and let both users use gesscale/bridge/# if the broker "
                                "has topic ACLs), or give --no-confirm")  # fmt: skip
            time.sleep(0.05)

    def _bridge_ready(self, now: float) -> bool:
        """True once a bridge answered the current ping; otherwise ping (again) when due."""
        if self._ready.is_set():
            return True
        if now - self._ping_at >= PING_EVERY_S and self._client.is_connected():
            self._nonce += 1
            self._ping_at = now
            reply = pong_topic(self.client_id)
            self._client.publish(PING_TOPIC, ping_payload(self.topic, reply, self._nonce), qos=1)
        return False

    # the Sink interface ---------------------------------------------------------------------------------------
    def send(self, key: bytes, value: bytes, key_hash: int | None = None) -> None:
        """Publish one record (MQTT has no key: `key` and `key_hash` are unused); with an outbox the record is
        kept on disk until confirmed, and paho keeps QoS 1 messages until the broker acknowledges them."""
        if self.outbox is not None:  # write-ahead: published by `service` once the outbox has it on disk
            rid = identity(value)
            self.outbox.add(rid, value)
            self._ids.add(rid)
            self._unpublished.append(value)
            return
        self._publish(value)

    def _publish(self, value: bytes) -> None:
        """Hand one record to paho (QoS 1: it keeps it until the broker acknowledges)."""
        info = self._client.publish(self.topic, value, qos=self.qos)
        if self.qos == 0 and info.rc != self._mqtt.MQTT_ERR_SUCCESS:
            self.dropped += 1  # QoS 0 promises nothing; counted, not retried
            return
        self._inflight.append((info, False))

    def service(self) -> None:
        """Write the outbox and publish what it now holds; count acknowledged publications; after a lost
        connection, once a bridge is subscribed again, publish again every record not seen in the topic."""
        if self.outbox is not None:
            self.outbox.flush()
            unpublished, self._unpublished = self._unpublished, []
            for value in unpublished:
                self._publish(value)
        inflight = self._inflight
        with self._puback_lock:
            while inflight and self._puback[inflight[0][0].mid] > 0:
                info, again = inflight.popleft()
                self._puback[info.mid] -= 1
                if not again:
                    self.acked += 1
        if self._republish_due and self._bridge_ready(time.monotonic()):
            self._republish()

    def _republish(self) -> None:
        """Publish again every unconfirmed record of the outbox that the topic was not seen to hold."""
        self._republish_due = False
        assert self.outbox is not None and self.confirm is not None
        oldest = self.outbox.oldest()
        if oldest is None:
            return
        with contextlib.suppress(Exception):  # Kafka unreadable now: publish everything again
            held = self.confirm.held(int((oldest - READ_BACK_MARGIN_S) * 1000))
            self._seen.update(rid for rid in held if held[rid])
        again = 0
        for rid, value in self.outbox.unconfirmed():
            if rid in self._seen:
                continue
            self._inflight.append((self._client.publish(self.topic, value, qos=1), True))
            again += 1
        self.resent += again
        if again:
            self.notify(f"published again {again} records not yet found in Kafka topic {self.confirm.topic} (the "
                        "MQTT broker may have lost what it had acknowledged)")  # fmt: skip

    def pending(self) -> int:
        """Publications not yet acknowledged, plus a re-publication waiting for a bridge (counted as one)."""
        return len(self._unpublished) + len(self._inflight) + self._republish_due

    def down_for(self, now: float) -> float:
        """Seconds since paho lost the connection, or since a re-publication has been waiting for a bridge to
        answer (0 while connected and nothing waits)."""
        waiting = 0.0
        if self._republish_due and not self._ready.is_set():
            if self._waiting_since is None:
                self._waiting_since = now
            waiting = now - self._waiting_since
        else:
            self._waiting_since = None
        return max(self._outage.down_for(now), waiting)

    def drain(self, timeout_s: float) -> bool:
        """Wait until every publication is acknowledged (and a due re-publication done) or the timeout passes."""
        deadline = time.monotonic() + timeout_s
        while self.pending() and time.monotonic() < deadline:
            self.service()
            time.sleep(0.01)
        self.service()
        return self.pending() == 0

    def verify(self, timeout_s: float) -> Verification | None:
        """Confirm every record of the outbox in the Kafka topic by key (module docstring); None without a
        confirmation target (MQTT alone cannot be read back)."""
        if self.confirm is None or self.outbox is None:
            return None
        deadline = time.monotonic() + timeout_s
        expected = self._ids | self.outbox.ids()
        oldest = self.outbox.oldest()
        since_ms = int(((oldest if oldest is not None else time.time()) - READ_BACK_MARGIN_S) * 1000)
        outcome = Verification(expected=len(expected), lost=self.outbox.count(), error="not read back")
        best, progress_at, rounds = None, time.monotonic(), 0
        while True:
            try:
                held = self.confirm.held(since_ms)
            except Exception as err:  # KafkaError and the like: the topic is not readable yet
                outcome.error = f"reading the topic back failed: {type(err).__name__}"
                if time.monotonic() >= deadline:
                    return outcome
                time.sleep(1.0)
                continue
            rounds += 1
            self.outbox.confirm(rid for rid in self.outbox.ids() if held.get(rid, 0))
            missing = self.outbox.count()
            duplicated = sum(held[rid] - 1 for rid in expected if held.get(rid, 0) > 1)
            outcome = Verification(len(expected), len(expected) - missing, missing, duplicated, self.restored,
                                   rounds, missing == 0)
            now = time.monotonic()
            if missing == 0 or now >= deadline:
                return outcome
            if best is None or missing < best:
                best, progress_at = missing, now
            elif now - progress_at >= SETTLE_S:
                self.notify(f"verification: {missing} of {len(expected)} records not in Kafka topic "
                            f"{self.confirm.topic} after {SETTLE_S:g} s without progress; publishing them again")
                self._seen.clear()
                self._republish_due = True
                self.drain(max(0.0, deadline - time.monotonic()))
                self.restored += missing
                progress_at = time.monotonic()
            time.sleep(0.5)

    def close(self) -> None:
        """Disconnect, stop paho's network thread, write and close the outbox (kept on disk when not empty)."""
        self._closing = True
        self._client.disconnect()
        self._client.loop_stop()
        if self.outbox is not None:
            left = self.outbox.count()
            self.outbox.close()
            if left:
                self.notify(f"{left} records not confirmed stay in the outbox {self.outbox.path}: the next run with "
                            f"client id {self.client_id} publishes them again")  # fmt: skip
