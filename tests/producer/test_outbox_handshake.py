"""The MQTT producer's durable outbox (written before publication), its run-derived client id and the bridge
handshake's messages."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

from producer.audit import identity
from producer.handshake import parse_ping, parse_pong, ping_payload, pong_payload, pong_topic
from producer.mqtt_sink import MqttEndpoint, MqttSink
from producer.outbox import Outbox
from producer.run import ProduceOptions, run_client_id


def test_outbox_keeps_records_on_disk_until_confirmed(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite"
    box = Outbox(path)
    for i in range(5):
        box.add(f"s{i}-0".encode(), f'{{"key": "s{i}-0"}}'.encode())
    box.add(b"s1-0", b"again")  # the same key again keeps the first row
    box.flush()
    box._db.close()  # as if the producer were killed: nothing but what flush wrote
    reopened = Outbox(path)
    assert reopened.count() == 5 and dict(reopened.unconfirmed())[b"s1-0"] == b'{"key": "s1-0"}'
    assert reopened.confirm([b"s0-0", b"s3-0", b"unknown"]) == 2
    assert reopened.ids() == {b"s1-0", b"s2-0", b"s4-0"} and reopened.oldest() is not None
    reopened.close()
    assert path.exists()  # unconfirmed rows stay for the next run
    last = Outbox(path)
    last.confirm(last.ids())
    last.close()
    assert not path.exists() and not Path(f"{path}-wal").exists()


def test_client_id_is_fixed_by_the_run_and_changes_with_it() -> None:
    a = ProduceOptions(mqtt="127.0.0.1:1883", rate=100, duration_s=5, duplication=1)
    assert run_client_id(a) == run_client_id(ProduceOptions(mqtt="127.0.0.1:1883", rate=100, duration_s=5,
                                                             duplication=1, resume=True))  # fmt: skip
    assert run_client_id(a) != run_client_id(ProduceOptions(mqtt="127.0.0.1:1883", rate=100, duration_s=5,
                                                             duplication=1, seed=2))  # fmt: skip
    assert run_client_id(ProduceOptions(client_id="mine")) == "mine"


def test_handshake_messages() -> None:
    reply = pong_topic("gesscale-producer-1")
    assert parse_ping(ping_payload("rides/a", reply, 7)) == ("rides/a", reply, 7)
    assert parse_ping(ping_payload("rides/a", "elsewhere/x", 7)) is None  # answers only go to pong topics
    assert parse_ping(b"not json") is None
    assert parse_pong(pong_payload(7, "bridge")) == 7 and parse_pong(b"{}") is None


def test_every_record_is_in_the_outbox_on_disk_before_it_is_published(mqtt_broker, tmp_path: Path) -> None:
    """Write-ahead: a kill -9 between a publication and the outbox's write would leave a record in Kafka that a
    resumed run neither expects nor sends (the outbox is read from disk by a separate connection, as the next run
    would)."""
    path = tmp_path / "outbox.sqlite"
    endpoint = MqttEndpoint(mqtt_broker.host, mqtt_broker.port)
    sink = MqttSink(endpoint, f"wal/{uuid.uuid4().hex[:8]}", 1, lambda _: None, f"wal-{uuid.uuid4().hex[:8]}",
                    outbox=Outbox(path))  # fmt: skip
    reader = sqlite3.connect(path)
    published, not_on_disk = [], []
    real_publish = sink._client.publish

    def publish(topic: str, value: bytes, qos: int):  # the real client, watched
        rid = identity(value)
        if reader.execute("SELECT 1 FROM outbox WHERE id = ?", (rid,)).fetchone() is None:
            not_on_disk.append(rid)
        published.append(rid)
        return real_publish(topic, value, qos=qos)

    sink._client.publish = publish
    try:
        for i in range(3000):
            sink.send(b"", f'{{"key": "w{i}-0"}}'.encode())
            if i % 700 == 0:
                sink.service()
        assert sink.drain(30)
    finally:
        sink.close()
        reader.close()
    assert len(published) == 3000 and sink.acked == 3000
    assert not_on_disk == []
