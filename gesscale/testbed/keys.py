"""Exactly-once accounting by unique record keys: produced vs processed, lost, duplicated.

Two bases, chosen by the job's query (`jobs/query.py`, `PER_RECORD`):
- **output keys**, for a query whose output holds one row per good input record keyed by its unique key (the
  map `nearest-landmark`): every input key must be found once in the output (or its record dead-lettered);
- **input offsets**, for any other query (an aggregation such as `frequent-routes`, whose output is one record
  per window, or a filter): every input record must lie in the input range of exactly one committed micro-batch
  (the job's own per-batch record, `batch_ranges`) or be dead-lettered, and no output key (a window) may be
  written twice. What the query then does with a consumed record (count it, drop it as later than its
  watermark: `late`) is the query's semantics, not a loss.

Every ride record carries a unique key (`<ride>-<dup>`, the `key` field of its JSON value; the Kafka message
key is the ride id, shared by the copies — producer/records.py). The job writes a good record keyed by that
unique key and a dead letter keyed by where it was read, `<topic>/<partition>/<offset>` (jobs/records.py).
After a run:
- produced = distinct unique keys in the input topic (a record the producer re-sent after an outage has the
  same key, so it is counted once);
- processed = those found in the output topic, or whose input position is in the dead-letter topic;
- unprocessed = records the job had not read yet when it was stopped (at or past the offsets of its last
  committed micro-batch, from its checkpoint): a run stopped with a backlog leaves those, they are not lost;
- lost = produced − processed − unprocessed; duplicated = output and dead-letter records beyond the first per key
  (input basis: plus input records consumed by more than one committed micro-batch).
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaConsumer, TopicPartition

from gesscale.batch_record import BatchRecord

if TYPE_CHECKING:
    from gesscale.testbed.job import TestbedJob

OUTPUT_KEYS, INPUT_OFFSETS = "output keys", "input offsets"


def _message_key(record: Any) -> bytes:
    return record.key


def scan_topic(bootstrap: str, topic: str, visit: Callable[[Any], None], idle_polls: int = 30,
               doing: str = "reading it") -> None:
    """Call `visit(record)` for every record of `topic`, from the beginning to the end offsets taken at the start;
    TimeoutError after `idle_polls` empty polls of a second (`doing` says what for, in its message)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             check_crcs=False, max_partition_fetch_bytes=16 << 20, fetch_max_bytes=64 << 20)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            return
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        todo = {tp for tp in tps if ends[tp] > 0}
        idle = 0
        while todo:
            got = consumer.poll(timeout_ms=1000, max_records=50_000)
            idle = 0 if got else idle + 1
            if idle >= idle_polls:
                raise TimeoutError(f"{topic}: no progress for {idle_polls} s while {doing}")
            for tp, records in got.items():
                for r in records:
                    if r.offset < ends[tp]:
                        visit(r)
            todo = {tp for tp in todo if (consumer.position(tp) or 0) < ends[tp]}
    finally:
        consumer.close()


def key_counts(bootstrap: str, topic: str, idle_polls: int = 30,
               key_of: Callable[[Any], bytes] = _message_key) -> Counter[bytes]:
    """How many records carry each key (`key_of(record)`) in `topic`, from the beginning to the end offsets."""
    counts: Counter[bytes] = Counter()
    scan_topic(bootstrap, topic, lambda r: counts.update((key_of(r),)), idle_polls, "counting keys")
    return counts


@dataclass(frozen=True)
class Accounting:
    """The exactly-once figures of one run."""

    produced: int
    processed: int
    lost: int
    duplicated: int
    dead_letters: int
    unprocessed: int = 0
    basis: str = OUTPUT_KEYS  # or INPUT_OFFSETS (module docstring)
    outputs: int = 0  # records in the output topic
    late: int = 0  # input basis: rows the query dropped as later than its watermark (consumed, not lost)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"produced": self.produced, "processed": self.processed, "lost": self.lost,
                "duplicated": self.duplicated, "dead_letters": self.dead_letters, "unprocessed": self.unprocessed,
                "basis": self.basis, "outputs": self.outputs, "late": self.late}


@dataclass(frozen=True)
class BatchRange:
    """The input a committed micro-batch read: [start, end) per partition (a partition missing from `start`
    starts at 0)."""

    batch_id: int
    start: dict[int, int]
    end: dict[int, int]

    def intervals(self) -> frozenset[tuple[int, int, int]]:
        """(partition, first, past-last) of each non-empty part: two records of one batch compare by these."""
        return frozenset((p, self.start.get(p, 0), e) for p, e in self.end.items() if e > self.start.get(p, 0))


def _ints(offsets: Any) -> dict[int, int]:
    return {int(p): int(o) for p, o in (offsets or {}).items()}


def _checkpoint_ends(checkpoint: Path) -> dict[int, dict[int, int]]:
    """End offsets of the committed batches whose offset log the checkpoint still keeps (Spark prunes old ones)."""
    ends: dict[int, dict[int, int]] = {}
    try:
        committed = {int(p.name) for p in (Path(checkpoint) / "commits").iterdir() if p.name.isdigit()}
    except OSError:
        return ends
    for batch in committed:
        try:
            lines = (Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
            ends[batch] = _ints(json.loads(lines[-1]))
        except (OSError, ValueError, IndexError, AttributeError):
            continue
    return ends


def batch_ranges(checkpoint: Path, observations: Iterable[BatchRecord]) -> list[BatchRange]:
    """The input range of every committed micro-batch: the job's per-batch observations (`batches.jsonl`, one
    line per batch after its commit, with `start_offsets`/`end_offsets`), completed from the checkpoint's offset
    log for a batch without its line (a driver killed between a commit and the line). One entry per distinct
    (batch, range): a batch recorded twice with the same range is one batch."""
    seen: dict[tuple[int, frozenset[tuple[int, int, int]]], BatchRange] = {}
    ends: dict[int, dict[int, int]] = {}
    for obs in observations:
        if obs.end_offsets is None:
            continue
        r = BatchRange(obs.batch_id, _ints(obs.start_offsets), _ints(obs.end_offsets))
        seen.setdefault((r.batch_id, r.intervals()), r)
        ends[r.batch_id] = r.end
    logged = {b for b, _ in seen}
    from_checkpoint = _checkpoint_ends(checkpoint)
    for batch, end in sorted(from_checkpoint.items()):
        if batch in logged:
            continue
        start = {} if batch == 0 else ends.get(batch - 1, from_checkpoint.get(batch - 1))
        if start is None:
            continue  # neither log knows where it started (cannot happen for the latest batches)
        r = BatchRange(batch, start, end)
        seen.setdefault((batch, r.intervals()), r)
    return sorted(seen.values(), key=lambda r: r.batch_id)


def coverage(ranges: Iterable[BatchRange]) -> Callable[[int, int], int]:
    """`count(partition, offset)`: how many of `ranges` hold that input record (1 for exactly once)."""
    deltas: dict[int, Counter[int]] = {}
    for r in ranges:
        for p, lo, hi in r.intervals():
            d = deltas.setdefault(p, Counter())
            d[lo] += 1
            d[hi] -= 1
    bounds: dict[int, list[int]] = {}
    counts: dict[int, list[int]] = {}
    for p, d in deltas.items():
        bounds[p] = sorted(d)
        running, out = 0, []
        for b in bounds[p]:
            running += d[b]
            out.append(running)
        counts[p] = out

    def count(partition: int, offset: int) -> int:
        i = bisect.bisect_right(bounds.get(partition, []), offset) - 1
        return counts[partition][i] if i >= 0 else 0

    return count


def committed_offsets(checkpoint: Path) -> dict[int, int] | None:
    """Input offsets up to which the job's last committed micro-batch read (None before the first commit)."""
    try:
        commits = [int(p.name) for p in (Path(checkpoint) / "commits").iterdir() if p.name.isdigit()]
        if not commits:
            return None
        lines = (Path(checkpoint) / "offsets" / str(max(commits))).read_text().splitlines()
        return {int(k): int(v) for k, v in json.loads(lines[-1]).items()}
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def input_identity(topic: str) -> Callable[[Any], bytes]:
    """Identity of an input record: its unique `key` field, or `<topic>/<partition>/<offset>` when unparseable."""

    def identity(record: Any) -> bytes:
        try:
            key = json.loads(record.value)["key"]
            if isinstance(key, str) and key:
                return key.encode()
        except (ValueError, TypeError, KeyError):
            pass
        return f"{topic}/{record.partition}/{record.offset}".encode()

    def both(record: Any) -> bytes:
        return identity(record) + b"\0" + f"{topic}/{record.partition}/{record.offset}".encode()

    return both


def tally(inputs: Iterable[bytes], out: Counter[bytes], dead: Counter[bytes], consumed: dict[int, int] | None,
          ranges: Iterable[BatchRange] | None = None) -> Accounting:
    """The accounting of input identities (`input_identity`) against output and dead-letter key counts (pure).

    `ranges` None: the output-keys basis; else the input-offsets basis over these committed batches."""
    count = coverage(ranges) if ranges is not None else None
    done: dict[bytes, bool] = {}
    pending: dict[bytes, bool] = {}
    twice = 0
    for ident in inputs:
        key, _, origin = ident.partition(b"\0")
        _, part, offset = origin.decode().rsplit("/", 2)
        if count is None:
            hit = key in out
        else:
            times = count(int(part), int(offset))
            hit, twice = times > 0, twice + max(0, times - 1)
        done[key] = done.get(key, False) or hit or origin in dead
        unread = consumed is not None and int(offset) >= consumed.get(int(part), 0)
        pending[key] = pending.get(key, True) and unread
    processed = sum(done.values())
    unprocessed = sum(1 for k, d in done.items() if not d and pending[k])
    return Accounting(
        produced=len(done),
        processed=processed,
        lost=len(done) - processed - unprocessed,
        duplicated=twice + sum(c - 1 for c in out.values() if c > 1) + sum(c - 1 for c in dead.values() if c > 1),
        dead_letters=sum(dead.values()),
        unprocessed=unprocessed,
        basis=OUTPUT_KEYS if count is None else INPUT_OFFSETS,
        outputs=sum(out.values()),
    )


def account(bootstrap: str, input_topic: str, output_topic: str, dead_letter_topic: str,
            consumed: dict[int, int] | None = None, ranges: Iterable[BatchRange] | None = None) -> Accounting:
    """Compare the records of the input with those of the output and dead-letter topics (see module doc).

    `consumed` (from `committed_offsets`) tells which input records the job had read when it stopped; `ranges`
    (from `batch_ranges`) selects the input-offsets basis.
    """
    inputs = key_counts(bootstrap, input_topic, key_of=input_identity(input_topic))
    out = key_counts(bootstrap, output_topic)
    dead = key_counts(bootstrap, dead_letter_topic)
    return tally(inputs, out, dead, consumed, ranges)


def account_job(job: TestbedJob) -> Accounting:
    """The accounting of a testbed's job after it stopped, on the basis its query calls for (module doc)."""
    from dataclasses import replace

    from gesscale.testbed.job import read_batches
    from jobs.query import load_query

    s = job.settings
    observations = read_batches(job.batches_path)[0]
    ranges = None if load_query(s.query).per_record else batch_ranges(job.checkpoint, observations)
    acc = account(s.bootstrap, s.input, s.output, s.dead_letter, committed_offsets(job.checkpoint), ranges)
    late = {o.batch_id: o.late_rows for o in observations}
    return replace(acc, late=sum(late.values()))
