"""Small Kafka admin helpers every data-plane command needs: create a topic, read end offsets, count records.

Thin wrappers over kafka-python that turn "cannot reach the broker" into a UserError naming the address. Every
client takes the cluster's TLS/SASL settings from the environment (gesscale.brokers.security).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from gesscale.brokers.security import kafka_client_config
from gesscale.errors import UserError


def require_reachable(bootstrap: str, timeout_s: float = 2.0) -> None:
    """UserError at once when no address of `bootstrap` (host:port[,host:port...]) accepts a TCP connection."""
    from gesscale.process import port_answers

    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        if not port.isdigit():
            raise UserError(f"bootstrap address must be host:port, got {address.strip()!r}")
        if port_answers(int(port), host or "127.0.0.1", timeout_s):
            return
    raise UserError(f"no Kafka broker answers at {bootstrap}")


@contextmanager
def admin_client(bootstrap: str, timeout_s: float = 10.0) -> Iterator:
    """A KafkaAdminClient for `bootstrap`, closed on exit; UserError when no broker answers."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    require_reachable(bootstrap)
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="gesscale-admin",
            request_timeout_ms=int(timeout_s * 1000),
            bootstrap_timeout_ms=int(timeout_s * 1000),
            **kafka_client_config(),
        )
    except KafkaError:
        raise UserError(f"no Kafka broker answers at {bootstrap}") from None
    try:
        yield admin
    finally:
        admin.close()


def ensure_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> int:
    """Create `topic` with `partitions` partitions (and the topic `configs`, e.g. `message.timestamp.type`) unless
    it exists; return its partition count. An existing topic is left as it is."""
    from kafka.errors import TopicAlreadyExistsError

    with admin_client(bootstrap) as admin:
        if topic not in set(admin.list_topics()):
            spec = {"num_partitions": partitions, "replication_factor": 1}
            if configs:
                spec["configs"] = dict(configs)
            with suppress(TopicAlreadyExistsError):  # created meanwhile by someone else: fine
                admin.create_topics({topic: spec}, wait_for_metadata=True)
    return len(partitions_of(bootstrap, topic))


def partitions_of(bootstrap: str, topic: str) -> list[int]:
    """The partition ids of `topic` (empty when it does not exist)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="gesscale-meta", **kafka_client_config())
    try:
        return sorted(consumer.partitions_for_topic(topic) or [])
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """{partition: end offset} of `topic` (the offset the next record will get)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="gesscale-offsets", **kafka_client_config())
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        return {tp.partition: off for tp, off in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()


def read_values(
    bootstrap: str, topic: str, idle_timeout_s: float = 3.0, settle_s: float = 0.5, since_ms: int | None = None,
    client_config: dict | None = None,
) -> Iterator[tuple[int, int, bytes]]:
    """Every (partition, offset, value) of `topic` from the beginning (or from the first record stamped at or
    after `since_ms`, by offsets_for_times), read with assign + poll (no group).

    Ends when every partition has been read up to the end offset taken at the start AND then nothing more
    arrives for `settle_s` — so a broker that under-reports end offsets (tansu) cannot cut the read short —
    or when nothing at all arrives for `idle_timeout_s`. `client_config`: kafka-python security settings
    (TLS, SASL), by default those of the environment (gesscale.brokers.security).
    """
    import time

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id="gesscale-reader", enable_auto_commit=False, max_poll_records=5000,
        **(kafka_client_config() if client_config is None else client_config),
    )
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not parts:
            return
        consumer.assign(parts)
        ends = consumer.end_offsets(parts)
        if since_ms is None:
            consumer.seek_to_beginning(*parts)
            starts = dict.fromkeys(parts, 0)
        else:
            found = consumer.offsets_for_times(dict.fromkeys(parts, since_ms))
            starts = {tp: ends[tp] if found.get(tp) is None else found[tp].offset for tp in parts}
            for tp in parts:
                consumer.seek(tp, starts[tp])
        remaining = {tp for tp in parts if ends[tp] > starts[tp]}
        last_data = time.monotonic()
        while True:
            quiet = time.monotonic() - last_data
            if quiet >= idle_timeout_s or (not remaining and quiet >= settle_s):
                return
            batch = consumer.poll(timeout_ms=100)
            for tp, messages in batch.items():
                for msg in messages:
                    yield tp.partition, msg.offset, msg.value
                if messages:
                    last_data = time.monotonic()
                    if messages[-1].offset + 1 >= ends[tp]:
                        remaining.discard(tp)
    finally:
        consumer.close()
