"""Every record's end-to-end latency in a live run, from the broker's append timestamps (docs/metrics.md,
"Record latency").

The testbed creates the input, output and dead-letter topics with `message.timestamp.type=LogAppendTime`, so a
record's timestamp is the broker's clock when it appended it (`gesscale broker check` probes that the broker
does). After the job stopped:
- **a per-record query** (the map `nearest-landmark`): the latency of an input record is its output's append
  time minus its own, matched by the record's unique key (the output is keyed by it); a record the job
  dead-lettered is matched to its dead letter (keyed `<input topic>/<partition>/<offset>`);
- **an aggregating query** (`frequent-routes`): a record has no output of its own, so its latency is the commit of
  the micro-batch that consumed it (that batch's `time` in `batches.jsonl`) minus its append time.
Only records appended at or after `since_ms` (the start of the day: the warm-up and probe records come before)
count. A record not processed when the job stopped has an infinite latency (`gesscale.latency`).

Each record is also given the micro-batch that read it (by the batches' input ranges) and the nodes of the
executors the job had when that batch completed (`BatchRecord.executors`): one of them processed it. The job
records no finer (per task) placement.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gesscale.batch_record import BatchRecord
from gesscale.testbed.keys import BatchRange

LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
STAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime", -1: "none"}
RECORD_COLUMNS = ("key", "partition", "offset", "appended_ms", "done_ms", "latency_ms", "batch_id", "nodes")
OUTPUT_APPEND, BATCH_COMMIT = "output append", "batch commit"


@dataclass
class RecordLatencies:
    """The day's input records with their latency: parallel arrays, one entry per distinct input key."""

    keys: list[str]
    partition: np.ndarray
    offset: np.ndarray
    appended_ms: np.ndarray
    done_ms: np.ndarray  # nan: not processed
    batch_id: np.ndarray  # -1: in no committed batch
    batch_nodes: dict[int, list[str]]
    basis: str
    stamps: dict[str, list[str]]  # topic role -> the timestamp types its records carried
    excluded: int  # input records appended before `since_ms` (warm-up, probe)

    @property
    def latencies_s(self) -> np.ndarray:
        """Seconds from append to processing; inf for a record not processed."""
        lat = (self.done_ms - self.appended_ms) / 1000.0
        return np.where(np.isnan(lat), math.inf, lat)

    @property
    def processed(self) -> int:
        """Records with a finite latency."""
        return int(np.isfinite(self.latencies_s).sum())

    def write_csv(self, path: Path) -> Path:
        """Every record's latency as gzipped CSV (`RECORD_COLUMNS`; done and latency empty when unprocessed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", newline="") as f:
            w = csv.writer(f)
            w.writerow(RECORD_COLUMNS)
            for i, key in enumerate(self.keys):
                done = self.done_ms[i]
                b = int(self.batch_id[i])
                w.writerow([key, int(self.partition[i]), int(self.offset[i]), int(self.appended_ms[i]),
                            "" if np.isnan(done) else int(done),
                            "" if np.isnan(done) else int(done - self.appended_ms[i]),
                            b, "+".join(self.batch_nodes.get(b, []))])
        return path


def read_records_csv(path: Path) -> list[dict[str, Any]]:
    """The rows `RecordLatencies.write_csv` wrote (numbers as ints, None where empty)."""
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    ints = ("partition", "offset", "appended_ms", "done_ms", "latency_ms", "batch_id")
    return [{k: (int(v) if v != "" else None) if k in ints else v for k, v in r.items()} for r in rows]


def _scan(bootstrap: str, topic: str, visit: Callable[[Any], None], idle_polls: int = 30) -> None:
    """Call `visit(record)` for every record of `topic` from the beginning to the end offsets taken at the start."""
    from gesscale.testbed.keys import scan_topic

    scan_topic(bootstrap, topic, visit, idle_polls, "reading timestamps")


def _unique_key(topic: str, record: Any) -> str:
    """An input record's unique key (the `key` field of its JSON value), or where it was read if it has none."""
    try:
        key = json.loads(record.value)["key"]
        if isinstance(key, str) and key:
            return key
    except (ValueError, TypeError, KeyError):
        pass
    return f"{topic}/{record.partition}/{record.offset}"


def first_appends(bootstrap: str, topic: str, key_of: Callable[[Any], str]) -> tuple[dict[str, tuple[int, int, int]],
                                                                                     set[str]]:
    """{key: (timestamp ms, partition, offset)} of the first record of each key in `topic`, and the timestamp
    types seen (`STAMP_TYPES`)."""
    first: dict[str, tuple[int, int, int]] = {}
    types: set[str] = set()

    def visit(r: Any) -> None:
        types.add(STAMP_TYPES.get(r.timestamp_type, str(r.timestamp_type)))
        k = key_of(r)
        if k not in first or r.timestamp < first[k][0]:
            first[k] = (int(r.timestamp), int(r.partition), int(r.offset))

    _scan(bootstrap, topic, visit)
    return first, types


def locate(partition: np.ndarray, offset: np.ndarray, ranges: Iterable[BatchRange]) -> np.ndarray:
    """The id of the committed batch whose input range holds each (partition, offset); -1 for none (the latest
    batch that holds it when two do, a replay)."""
    out = np.full(partition.shape, -1, dtype=np.int64)
    by_part: dict[int, list[tuple[int, int, int]]] = {}
    for r in ranges:
        for p, lo, hi in r.intervals():
            by_part.setdefault(p, []).append((lo, hi, r.batch_id))
    for p, spans in by_part.items():
        spans.sort()
        lo = np.array([s[0] for s in spans])
        hi = np.array([s[1] for s in spans])
        ids = np.array([s[2] for s in spans])
        sel = partition == p
        i = np.searchsorted(lo, offset[sel], side="right") - 1
        ok = (i >= 0) & (offset[sel] < hi[np.maximum(i, 0)])
        out[np.nonzero(sel)[0][ok]] = ids[i[ok]]
    return out


def batch_times_and_nodes(observations: Iterable[BatchRecord], node_at: Callable[[str], str | None]
                          ) -> tuple[dict[int, float], dict[int, list[str]]]:
    """Per batch id: its commit time (Unix s; the last line of a batch recorded twice) and the nodes of the
    executors the job had when it completed (`node_at(host)`; a host that is no node is kept as it is)."""
    times: dict[int, float] = {}
    nodes: dict[int, list[str]] = {}
    for o in observations:
        if o.batch_id not in times or o.time >= times[o.batch_id]:
            times[o.batch_id] = o.time
            nodes[o.batch_id] = sorted({node_at(e.host) or e.host for e in o.executors})
    return times, nodes


def record_latencies(bootstrap: str, input_topic: str, output_topic: str, dead_letter_topic: str, *,
                     per_record: bool, observations: list[BatchRecord], ranges: list[BatchRange],
                     since_ms: int, node_at: Callable[[str], str | None] = lambda host: None) -> RecordLatencies:
    """Every input record appended at or after `since_ms` with its processing time (module doc)."""
    inputs, in_types = first_appends(bootstrap, input_topic, lambda r: _unique_key(input_topic, r))
    day = {k: v for k, v in inputs.items() if v[0] >= since_ms}
    keys = list(day)
    ts = np.array([day[k][0] for k in keys], dtype=float)
    part = np.array([day[k][1] for k in keys], dtype=np.int64)
    off = np.array([day[k][2] for k in keys], dtype=np.int64)
    batch = locate(part, off, ranges)
    times, nodes = batch_times_and_nodes(observations, node_at)
    stamps = {"input": sorted(in_types)}
    done = np.full(ts.shape, np.nan)
    if per_record:
        outputs, out_types = first_appends(bootstrap, output_topic, lambda r: (r.key or b"").decode(errors="replace"))
        dead, dead_types = first_appends(bootstrap, dead_letter_topic,
                                         lambda r: (r.key or b"").decode(errors="replace"))
        stamps["output"], stamps["dead_letter"] = sorted(out_types), sorted(dead_types)
        for i, k in enumerate(keys):
            hit = outputs.get(k) or dead.get(f"{input_topic}/{part[i]}/{off[i]}")
            if hit is not None:
                done[i] = hit[0]
        basis = OUTPUT_APPEND
    else:
        commit = np.array([times.get(int(b), np.nan) * 1000.0 if b >= 0 else np.nan for b in batch])
        done = np.round(commit) if commit.size else done
        basis = BATCH_COMMIT
    return RecordLatencies(keys, part, off, ts, done, batch, nodes, basis, stamps, len(inputs) - len(day))


def arrivals_per_second(appended_ms: np.ndarray, t0_unix_s: float) -> dict[str, Any]:
    """The records' appends counted per second on a clock that starts at `t0_unix_s` (the testbed's): `from_s`,
    the first second, and `counts` from it (`gesscale.twin.arrivals_per_second` reads it)."""
    if appended_ms.size == 0:
        return {"from_s": 0, "counts": []}
    sec = np.floor(appended_ms / 1000.0 - t0_unix_s).astype(int)
    first = int(sec.min())
    return {"from_s": first, "counts": np.bincount(sec - first).astype(int).tolist()}


def report(rec: RecordLatencies, period_ends_unix_s: list[float], slo_s: float | None = None
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's latency figures for the report (`gesscale.latency.run_summary` plus how they were measured) and
    one summary per control period (records counted in the period of their append)."""
    from gesscale.latency import SLO_S, by_period, run_summary

    lat = rec.latencies_s
    run = run_summary(lat, slo_s=SLO_S if slo_s is None else slo_s)
    run |= {"processed": rec.processed, "unprocessed": len(rec.keys) - rec.processed,
            "excluded_before_day": rec.excluded, "basis": rec.basis, "timestamps": rec.stamps,
            "broker_append_times": all(t == ["LogAppendTime"] for role, t in rec.stamps.items() if t)}
    periods = by_period(rec.appended_ms / 1000.0, lat, period_ends_unix_s)
    return run, periods


def floor_violations(rows: Iterable[Mapping[str, Any]], rtt_ms: Callable[[str], float]) -> list[Mapping[str, Any]]:
    """The processed records whose latency is below the smallest emulated RTT between the site and the nodes of
    the batch that read them (`rtt_ms(node)`): a record's processing makes at least one round trip from an
    executor to the site (the read of its range, the write of its output), so none should be."""
    bad = []
    for r in rows:
        if r["latency_ms"] is None or not r["nodes"]:
            continue
        floor = min(rtt_ms(n) for n in r["nodes"].split("+"))
        if r["latency_ms"] < floor - 1:  # the broker stamps whole milliseconds
            bad.append(r)
    return bad
