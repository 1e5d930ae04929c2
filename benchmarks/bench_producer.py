"""Producer throughput against a bare kafka-python send loop, measured in the same run on the same broker.

    .venv/bin/python benchmarks/bench_producer.py [--records 100000] [--rounds 2] [--kafka HOST:PORT]

Both sides use the same client settings (acks=all, linger 20 ms, 256 KiB batches) and the same records, and
each is timed from its first send until every record is acknowledged (client set-up excluded on both sides).
The bare loop sends values encoded before its clock starts; the producer does its whole job inside the clock
(synthetic rides generated, encoded as JSON, scheduled by an unthrottled rate pattern, sent, acks tracked).
Rounds alternate bare / producer on fresh topics so a broker that slows down as it fills hurts both alike.
Prints each run and the median ratio producer / bare (target >= 0.8), for 1 and 3 records per ride. Without
--kafka an embedded broker is started on a free port and removed afterwards.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from gesscale.brokers import start_kafka
from gesscale.brokers.process import free_port
from gesscale.brokers.topics import ensure_topic
from producer.records import RideEncoder
from producer.run import ProduceOptions, produce
from producer.synthetic import synthetic_rides

PARTITIONS = 8


def bare_loop(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """Records/s of a plain kafka-python loop: send everything, flush, with the producer's client settings."""
    from kafka import KafkaProducer

    client = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=256 * 1024)
    start = time.perf_counter()
    futures = [client.send(topic, key=key, value=value) for key, value in records]
    client.flush()
    elapsed = time.perf_counter() - start
    assert all(f.succeeded() for f in futures)
    client.close()
    return len(records) / elapsed


def gesscale_producer(bootstrap: str, topic: str, n: int, duplication: int) -> float:
    """Records/s of `gesscale produce` internals, unthrottled (a rate pattern far above what any client does)."""
    opts = ProduceOptions(rate=10_000_000, duration_s=60, duplication=duplication, limit=n, kafka=bootstrap,
                          topic=topic, partitions=PARTITIONS)  # fmt: skip
    result = produce(opts, lambda message: None)
    assert result.stats.acked == n, result.stats
    return n / result.stats.elapsed_s  # first record due -> every record acknowledged, as for the bare loop


def main() -> None:
    """Run the comparison and print records/s and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per run")
    parser.add_argument("--rounds", type=int, default=2, help="bare/producer pairs")
    parser.add_argument("--kafka", help="bootstrap address of an existing broker (default: start one)")
    parser.add_argument("--duplication", type=int, nargs="+", default=[1, 3],
                        help="copies per ride to compare (the paper replays each ride 3 times)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gesscale-bench-"))
    broker = None
    try:
        if args.kafka:
            bootstrap = args.kafka
        else:
            broker = start_kafka(free_port(19092, 19199), scratch / "kafka")
            bootstrap = broker.bootstrap
        for duplication in args.duplication:
            ratios = []
            # The same records the producer will send, encoded before the bare loop's clock starts.
            records = []
            for ride in itertools.islice(synthetic_rides(days=None, seed=1), -(-args.records // duplication)):
                encoder = RideEncoder(ride)
                records.extend((encoder.key_bytes, encoder.value(d)) for d in range(duplication))
            records = records[: args.records]
            size = sum(len(v) for _, v in records) / len(records)
            print(f"broker {bootstrap}: {args.records} records of ~{size:.0f} B, {PARTITIONS} partitions, "
                  f"{duplication} record(s) per ride")  # fmt: skip
            for round_no in range(1, args.rounds + 1):
                topic = f"bench-bare-{uuid.uuid4().hex[:8]}"
                ensure_topic(bootstrap, topic, PARTITIONS)
                bare = bare_loop(bootstrap, topic, records)
                topic = f"bench-prod-{uuid.uuid4().hex[:8]}"
                ensure_topic(bootstrap, topic, PARTITIONS)
                ours = gesscale_producer(bootstrap, topic, args.records, duplication)
                ratios.append(ours / bare)
                print(f"  round {round_no}: bare kafka-python {bare:,.0f} rec/s, gesscale produce {ours:,.0f} rec/s, "
                      f"ratio {ours / bare:.2f}")  # fmt: skip
            print(f"  median ratio producer/bare, duplication {duplication}: {statistics.median(ratios):.2f} "
                  "(target >= 0.8)")
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
