"""The MQTT producer's durable outbox, its run-derived client id and the bridge handshake's messages (no broker)."""

from __future__ import annotations

from pathlib import Path

from producer.handshake import parse_ping, parse_pong, ping_payload, pong_payload, pong_topic
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
