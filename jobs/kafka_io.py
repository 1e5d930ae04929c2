"""Small kafka-python helpers of the job: topic metadata, topic creation, and the sink's key scan."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from gesscale.brokers.security import kafka_client_config

SCAN_IDLE_POLLS = 60  # one-second polls without a record before a key scan gives up


def _consumer(bootstrap: str, **options) -> KafkaConsumer:
    """A consumer without a group, with the cluster's TLS/SASL settings from the environment
    (gesscale.brokers.security)."""
    return KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, **options,
                         **kafka_client_config())


def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    """Number of partitions of each topic; a missing topic counts 0."""
    consumer = _consumer(bootstrap)
    try:
        return {t: len(consumer.partitions_for_topic(t) or ()) for t in topics}
    finally:
        consumer.close()


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create `topic` with `partitions` partitions unless it exists."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gesscale-job", **kafka_client_config())
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def _end_offsets(consumer: KafkaConsumer, topics: list[str]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for t in topics:
        tps = [TopicPartition(t, p) for p in sorted(consumer.partitions_for_topic(t) or ())]
        out[t] = {tp.partition: int(o) for tp, o in consumer.end_offsets(tps).items()}
    return out


def end_offsets(bootstrap: str, topics: list[str]) -> dict[str, dict[int, int]]:
    """Current end offset of every partition of `topics`."""
    consumer = _consumer(bootstrap)
    try:
        return _end_offsets(consumer, topics)
    finally:
        consumer.close()


class OffsetsReader:
    """`end_offsets` over one long-lived client: the job's driver asks before every micro-batch, and a new client
    per call (bootstrap, metadata) cost more than the question. A failed call drops the client."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._consumer: KafkaConsumer | None = None

    def end_offsets(self, topics: list[str]) -> dict[str, dict[int, int]]:
        """Current end offset of every partition of `topics` (asked of the broker, never cached)."""
        if self._consumer is None:
            self._consumer = _consumer(self.bootstrap)
        try:
            return _end_offsets(self._consumer, topics)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        """Close the client (the next call opens a new one)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def partition_end(bootstrap: str, topic: str, partition: int) -> int:
    """The current end offset of one partition."""
    consumer = _consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def written_keys(bootstrap: str, topic: str, partition: int, start: int, careful: bool) -> set[bytes]:
    """Keys a task must not write again to `topic[partition]`: those from `start` on when the task is `careful`
    (it may follow a partial write) or when the partition grew since the batch began (another task of the batch
    wrote there, or a stage that wrote was run again: PySpark's TaskContext does not tell stage attempts apart).
    Empty, at the cost of one offsets request, when the partition has not grown."""
    if not careful and partition_end(bootstrap, topic, partition) <= start:
        return set()
    return read_keys(bootstrap, topic, partition, start)


def read_keys(bootstrap: str, topic: str, partition: int, start: int) -> set[bytes]:
    """Keys of the records of one partition from `start` up to its current end."""
    consumer = _consumer(bootstrap, check_crcs=False, max_partition_fetch_bytes=16 << 20, fetch_max_bytes=64 << 20)
    tp = TopicPartition(topic, partition)
    keys: set[bytes] = set()
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        if end <= start:
            return keys
        consumer.seek(tp, start)
        idle = 0
        while (consumer.position(tp) or start) < end:
            got = consumer.poll(timeout_ms=1000, max_records=100_000).get(tp, [])
            idle = 0 if got else idle + 1
            if idle >= SCAN_IDLE_POLLS:
                raise TimeoutError(f"{topic}[{partition}]: stuck before offset {end} while scanning for keys")
            keys.update(rec.key for rec in got if rec.offset < end)
        return keys
    finally:
        consumer.close()
