"""Producer throughput against a bare kafka-python send loop, measured in the same run on the same broker.

    .venv/bin/python benchmarks/bench_producer.py [--records 100000] [--rounds 2] [--kafka HOST:PORT]

Both sides use the same client settings (producer.sinks.client_settings: acks=all, not idempotent, linger 20
ms, 256 KiB batches) and the same records, and each is timed from its first send until every record is
acknowledged (client set-up, including the topic's metadata, excluded on both sides). The bare loop sends
values encoded before its clock starts and lets kafka-python's default partitioner place them (murmur2 of the
key); the producer does its whole job inside the clock (synthetic rides generated, encoded as JSON, key hashes
computed for the same partitions, scheduled by an unthrottled rate pattern, sent, acks tracked, journal kept).
(Earlier versions left the bare loop idempotent, kafka-python's default but not the sink's setting, and
fetching the topic's metadata inside its clock; docs/data-plane.md says which version measured which figures.)
Rounds alternate bare / producer, each run on a fresh embedded broker (noida-db slows down as its state file
grows, which would otherwise favour whichever side ran first); with --kafka, on fresh topics of that broker.
Prints each run (with the load average and the CPU time per record of each side) and the median ratio producer
/ bare (target >= 0.8), for 1 and 3 records per ride.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from gesscale.brokers import start_kafka
from gesscale.brokers.topics import ensure_topic
from gesscale.process import free_port
from producer.run import ProduceOptions, produce
from producer.sinks import client_settings
from producer.synthetic import synthetic_encoded

PARTITIONS = 8


def bare_loop(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """Records/s of a plain kafka-python loop: send everything, flush, with the producer's client settings."""
    from kafka import KafkaProducer

    client = KafkaProducer(bootstrap_servers=bootstrap, **client_settings())
    client.partitions_for(topic)  # metadata fetched before the clock, as KafkaSink does when it starts
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


def cpu_s() -> float:
    """CPU seconds of this process so far, every thread (the sending loop and kafka-python's sender thread).

    Printed next to the rates: on a busy machine the rates swing with other load, CPU per record much less."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Brokers:
    """A fresh topic for every run: on a new embedded broker each time, or on the broker given by --kafka."""

    def __init__(self, external: str | None, scratch: Path) -> None:
        self.external, self.scratch, self.current = external, scratch, None

    def fresh(self, label: str) -> tuple[str, str]:
        """(bootstrap, topic) for the next run."""
        self.stop()
        topic = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        if self.external:
            bootstrap = self.external
        else:
            self.current = start_kafka(free_port(19092, 19199), self.scratch / topic)
            bootstrap = self.current.bootstrap
        ensure_topic(bootstrap, topic, PARTITIONS)
        return bootstrap, topic

    def stop(self) -> None:
        """Stop and delete the embedded broker of the previous run."""
        if self.current is not None:
            self.current.stop()
            shutil.rmtree(self.current.data_dir, ignore_errors=True)
            self.current = None


def main() -> None:
    """Run the comparison and print records/s and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per run")
    parser.add_argument("--rounds", type=int, default=3, help="bare/producer pairs per duplication")
    parser.add_argument("--kafka", help="bootstrap address of an existing broker (default: a fresh one per run)")
    parser.add_argument(
        "--duplication",
        type=int,
        nargs="+",
        default=[1, 3],
        help="copies per ride to compare (the paper replays each ride 3 times)",
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gesscale-bench-"))
    brokers = Brokers(args.kafka, scratch)
    try:
        for duplication in args.duplication:
            ratios = []
            # The same records the producer will send, encoded before the bare loop's clock starts.
            records = []
            rides = itertools.chain.from_iterable(synthetic_encoded(days=None, seed=1))
            for encoder in itertools.islice(rides, -(-args.records // duplication)):
                records.extend((encoder.key_bytes, encoder.value(d)) for d in range(duplication))
            records = records[: args.records]
            size = sum(len(v) for _, v in records) / len(records)
            where = args.kafka or "a fresh embedded noida-db per run"
            print(f"{args.records} records of ~{size:.0f} B, {PARTITIONS} partitions, {duplication} record(s) per "
                  f"ride, on {where}")  # fmt: skip
            for round_no in range(1, args.rounds + 1):
                target, cpu = brokers.fresh("bare"), cpu_s()
                bare = bare_loop(*target, records)
                bare_cpu = (cpu_s() - cpu) / args.records * 1e6
                target, cpu = brokers.fresh("prod"), cpu_s()
                ours = gesscale_producer(*target, args.records, duplication)
                ours_cpu = (cpu_s() - cpu) / args.records * 1e6
                ratios.append(ours / bare)
                print(f"  round {round_no}: bare kafka-python {bare:,.0f} rec/s, gesscale produce {ours:,.0f} rec/s, "
                      f"ratio {ours / bare:.2f} (load average {os.getloadavg()[0]:.2f}; CPU µs per record, client "
                      f"set-up included: bare {bare_cpu:.1f}, producer {ours_cpu:.1f})")  # fmt: skip
            print(
                f"  median ratio producer/bare, duplication {duplication}: {statistics.median(ratios):.2f} "
                "(target >= 0.8)"
            )
    finally:
        brokers.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
