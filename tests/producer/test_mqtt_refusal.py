"""A refused MQTT CONNECT is one error, never also an outage (producer/mqtt_sink.py): paho calls on_disconnect
after the refused CONNACK, and the producer used to print "unreachable ... retrying with backoff" before its
one-line error whenever paho's thread got there first (CI 2026-11-27, test_mqtt_tls [produce-wrong password])."""

from __future__ import annotations

import threading
from collections import defaultdict
from types import SimpleNamespace

from producer.mqtt_sink import MqttSink
from producer.sinks import OutageTracker


def _sink(said: list[str]) -> MqttSink:
    sink = object.__new__(MqttSink)  # paho's callbacks only, without a broker
    sink._refused = None
    sink._connected, sink._ready, sink._lost = threading.Event(), threading.Event(), threading.Event()
    sink._closing, sink.confirm, sink._inflight = False, None, {}
    sink._puback, sink._puback_lock = defaultdict(int), threading.Lock()
    sink._outage = OutageTracker(said.append, "MQTT 127.0.0.1:1")
    return sink


def test_a_refused_connect_then_its_disconnect_says_nothing() -> None:
    said: list[str] = []
    sink = _sink(said)
    sink._on_connect(None, None, None, SimpleNamespace(is_failure=True, __str__=lambda self: "Not authorized"), None)
    sink._on_disconnect(None, None, None, "Unspecified error", None)
    assert said == [] and sink._refused is not None and not sink._lost.is_set()


def test_a_lost_session_is_still_an_outage() -> None:
    said: list[str] = []
    sink = _sink(said)
    sink._on_connect(None, None, None, SimpleNamespace(is_failure=False), None)
    sink._on_disconnect(None, None, None, "Unspecified error", None)
    assert sink._lost.is_set() and any("unreachable" in s for s in said), said
