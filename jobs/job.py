"""The job: Kafka `rides` → a query (`jobs/query.py`; by default the nearest landmark) → Kafka `rides-enriched`
(or Parquet), exactly once.

`run(JobConfig(...))` starts Spark, the query, the metrics listener and the driver's HTTP API, and blocks until
the query ends (or is idle for `stop_when_idle_s`, or gets SIGTERM/SIGINT, which stop it cleanly).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from gesscale.errors import UserError

log = logging.getLogger("gesscale.job")
SINKS = ("kafka", "parquet")


@dataclass
class JobConfig:
    """Every knob of the job; the CLI maps its options one to one onto these fields."""

    bootstrap: str
    input: str
    output: str
    checkpoint: Path
    dead_letter: str | None = None  # default: "<input>-dead-letter"
    sink: str = "kafka"
    master: str = "local[2]"
    max_rows_per_batch: int | None = 50_000
    max_rows_per_range: int = 100_000
    trigger_ms: int = 0
    starting_offsets: str = "earliest"
    executors: int | None = None
    metrics_jsonl: Path | None = None
    http_host: str = "127.0.0.1"
    http_port: int | None = None
    ui_port: int = 14040
    bp_window_s: float = 60.0
    stop_when_idle_s: float | None = None
    available_now: bool = False
    driver_host: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    output_bootstrap: str | None = None  # default: `bootstrap` (output and dead-letter topics next to the input)
    query: str = "nearest-landmark"  # a `--query` value (jobs/query.py)
    input_wait_s: float = 60.0  # a missing input topic is waited for this long (its producer may start later)

    @property
    def dead_letter_topic(self) -> str:
        """The dead-letter topic's name."""
        return self.dead_letter or f"{self.input}-dead-letter"

    @property
    def sink_bootstrap(self) -> str:
        """The Kafka holding the output and dead-letter topics: `output_bootstrap`, else the input's."""
        return self.output_bootstrap or self.bootstrap

    def validate(self) -> None:
        """Raise UserError for values the job cannot run with."""
        if self.sink not in SINKS:
            raise UserError(f"--sink must be one of {', '.join(SINKS)}, not {self.sink!r}")
        if self.max_rows_per_batch is not None and self.max_rows_per_batch <= 0:
            raise UserError("--max-rows-per-batch must be > 0")
        if self.max_rows_per_range <= 0:
            raise UserError("--max-rows-per-range must be > 0")
        if self.starting_offsets not in ("earliest", "latest"):
            raise UserError("--starting-offsets must be earliest or latest")
        if self.executors is not None and self.executors < 0:
            raise UserError("--executors must be >= 0")
        for flag, port in (("--http-port", self.http_port), ("--ui-port", self.ui_port)):
            if port is not None and not 1 <= port <= 65535:
                raise UserError(f"{flag} must be a port in 1-65535, got {port}")
        if not self.input_wait_s >= 0:
            raise UserError("--wait-for-input must be >= 0 seconds")
        if self.dead_letter_topic in (self.input, self.output) or self.input == self.output:
            raise UserError("input, output and dead-letter topics must be three different topics")
        self.loaded_query()

    def loaded_query(self) -> Any:
        """The `Query` that `query` names (UserError when it cannot be loaded)."""
        from jobs.query import load_query

        return load_query(self.query)


class JobState:
    """What the batch writer tells the metrics listener and the idle check: counts per batch, whether a batch
    is being written, and when the job last did work."""

    def __init__(self) -> None:
        self.counts: dict[int, dict[str, int]] = {}
        self.last_rows_at = time.monotonic()
        self.writing = False
        self.batches = 0
        self.lock = threading.Lock()
        # tasks a micro-batch should have (the hook's `stream_slots`); None: as many as the source plans
        self.slots: Callable[[], int | None] | None = None

    def busy(self, writing: bool) -> None:
        """Mark the start/end of a batch's write."""
        with self.lock:
            self.writing = writing
            self.batches += 1 if writing else 0
            self.last_rows_at = time.monotonic()


def wait_for_input(count: Callable[[], int], timeout_s: float, on_wait: Callable[[], None],
                   interval_s: float = 1.0) -> int:
    """The input topic's partition count from `count()`, asked again every `interval_s` while it is 0 (the topic
    does not exist yet: a job started before its producer), for at most `timeout_s`; `on_wait()` is called once
    when waiting starts. Returns 0 when the topic still does not exist."""
    deadline = time.monotonic() + timeout_s
    parts = count()
    if parts or timeout_s <= 0:
        return parts
    on_wait()
    while parts == 0 and time.monotonic() < deadline:
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
        parts = count()
    return parts


def _check_broker(cfg: JobConfig) -> int:
    """Partitions of the input topic; create the output topics like it (on the output's Kafka). UserError when
    a Kafka is unreachable or the input is missing."""
    from kafka.errors import KafkaError

    from jobs.kafka_io import ensure_topic, partition_counts

    def count() -> int:
        try:
            return partition_counts(cfg.bootstrap, [cfg.input])[cfg.input]
        except KafkaError as err:
            raise UserError(f"cannot reach Kafka at {cfg.bootstrap}: {err}") from err

    parts = wait_for_input(count, cfg.input_wait_s, lambda: log.warning(
        "input topic %r does not exist on %s yet: waiting up to %.0f s for its producer (--wait-for-input)",
        cfg.input, cfg.bootstrap, cfg.input_wait_s))
    if parts == 0:
        waited = f" after waiting {cfg.input_wait_s:.0f} s (--wait-for-input)" if cfg.input_wait_s else ""
        raise UserError(f"input topic {cfg.input!r} does not exist on {cfg.bootstrap}{waited}")
    topics = [cfg.dead_letter_topic] + ([cfg.output] if cfg.sink == "kafka" else [])
    for topic in topics:
        try:
            ensure_topic(cfg.sink_bootstrap, topic, parts)
        except KafkaError as err:
            raise UserError(f"cannot create topic {topic!r} on Kafka at {cfg.sink_bootstrap}: {err}") from err
    return parts


def _spark(cfg: JobConfig) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(cfg.master)
        .appName(f"gesscale-job {cfg.input}->{cfg.output}")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", str(cfg.ui_port))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")  # event times in the trace carry no zone
        .config("spark.dynamicAllocation.enabled", "false")
        .config("spark.executor.cores", "1")
        .config("spark.standalone.executorRemoveDelayOnDisconnection", "0s")
        .config("spark.sql.streaming.stopTimeout", "30s")
        # Python workers fork from a daemon that has imported the job's modules (jobs/spark_daemon.py)
        .config("spark.python.daemon.module", "jobs.spark_daemon")
    )
    if cfg.driver_host:
        builder = builder.config("spark.driver.host", cfg.driver_host).config("spark.driver.bindAddress",
                                                                              cfg.driver_host)
    for k, v in cfg.spark_conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _batch_writer(cfg: JobConfig, state: JobState) -> Any:
    """The `foreachBatch` function: write one micro-batch of the query's output exactly once.

    Everything about the output (partition counts, the end offsets logged before a batch, the producer and a
    replay's key scan) is asked of `cfg.sink_bootstrap`. The batch's dead letters (sent by the source's tasks
    while the batch runs) are counted from the dead-letter topic's end offsets before and after.
    """
    from jobs.kafka_io import OffsetsReader, partition_counts
    from jobs.kafka_sink import COUNTS_SCHEMA, SinkLog, WriteSpec, write_partition

    sink_log = SinkLog(cfg.checkpoint)
    topics = [cfg.dead_letter_topic] + ([cfg.output] if cfg.sink == "kafka" else [])
    parts = partition_counts(cfg.sink_bootstrap, topics)
    offsets = OffsetsReader(cfg.sink_bootstrap)

    def write(df: Any, batch_id: int) -> None:
        state.busy(True)
        try:
            _write(df, batch_id)
        finally:
            state.busy(False)

    def _write(df: Any, batch_id: int) -> None:
        slots = _slots(state)
        if slots is not None:
            # one task per counted executor: no task waits for a core, so a new executor's core goes to the
            # warm-up job, never to a task of a batch (jobs/hook.py). Coalescing reads the ranges in sequence.
            df = df.coalesce(slots)
        starts, replay = sink_log.begin(batch_id, lambda: offsets.end_offsets(topics))
        if replay:
            log.warning("batch %d runs again (after a restart): skipping records already written", batch_id)
        if cfg.sink == "parquet":
            df.persist()
            try:
                df.drop("partition").write.mode("overwrite").parquet(str(Path(cfg.output) / f"batch_id={batch_id}"))
                counts = {"written": df.count(), "skipped": 0}
            finally:
                df.unpersist()
        else:
            spec = WriteSpec(cfg.sink_bootstrap, cfg.output, parts[cfg.output], starts[cfg.output], replay)
            rows = df.mapInArrow(partial(write_partition, spec=spec), COUNTS_SCHEMA).collect()
            counts = {k: sum(int(r[k]) for r in rows) for k in ("written", "skipped")}
        dead_before = starts[cfg.dead_letter_topic]
        dead_now = offsets.end_offsets([cfg.dead_letter_topic])[cfg.dead_letter_topic]
        counts["dead_letters"] = sum(dead_now.values()) - sum(dead_before.values())
        with state.lock:
            state.counts[batch_id] = counts

    return write


def _input_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """End offsets of `topic`'s partitions (for the warm-up's range)."""
    from jobs.kafka_io import end_offsets

    return end_offsets(bootstrap, [topic]).get(topic, {})


def _slots(state: JobState) -> int | None:
    """The task count for the next micro-batch, or None (no limit) when unknown."""
    if state.slots is None:
        return None
    try:
        return state.slots()
    except Exception as err:  # noqa: BLE001 - the executor list is an optimisation; the batch runs regardless
        log.warning("executor count unknown (%s): the micro-batch keeps the source's partitions", err)
        return None


def _listener(tracker: Any, control: Any, state: JobState, sink: Any) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class ObservationListener(StreamingQueryListener):
        """Turns each progress event into an observation, logs it and appends it to the JSON lines file."""

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's API
            log.info("query started: id %s", event.id)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            try:
                progress = json.loads(event.progress.json)
                try:
                    executors = control.executors()
                except OSError as err:
                    log.warning("executors unavailable: %s", err)
                    executors = []
                with state.lock:
                    counts = state.counts.pop(int(progress["batchId"]), {})
                obs = tracker.update(progress, executors, counts)
                if obs.num_input_rows > 0:
                    with state.lock:
                        state.last_rows_at = time.monotonic()
                if sink is not None:
                    sink.write(obs.to_dict())
                log.info("batch %d: %d rows in %d ms, %.0f rows/s, backlog %d, bp_upstream %.2f, executors %s",
                         obs.batch_id, obs.num_input_rows, obs.batch_duration_ms, obs.processed_rate,
                         obs.backlog, obs.bp_upstream, ",".join(e.host for e in obs.executors))
            except Exception:  # noqa: BLE001 - a metrics bug must not kill the query
                log.exception("could not build the observation")

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            return

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            log.info("query terminated%s", f": {event.exception}" if event.exception else "")

    return ObservationListener()


def run(cfg: JobConfig) -> dict[str, Any] | None:
    """Run the job until it stops; returns the last batch record in its JSON form (`BatchRecord.to_dict`)."""
    from jobs.http_api import TOKEN_ENV, DriverApi, serve
    from jobs.metrics import prometheus_text
    from jobs.observation import ObservationTracker

    cfg.validate()
    _check_broker(cfg)
    cfg.checkpoint.mkdir(parents=True, exist_ok=True)
    tracker = ObservationTracker(cfg.bp_window_s)
    state = JobState()
    api = DriverApi(tracker.latest_dict, prometheus_text(lambda: tracker.latest), None, os.environ.get(TOKEN_ENV))
    server = None
    if cfg.http_port is not None:
        try:
            server = serve(api, cfg.http_host, cfg.http_port)
        except OSError as err:
            raise UserError(f"cannot listen on {cfg.http_host}:{cfg.http_port}: {err.strerror or err}") from err
    try:
        return _run_query(cfg, api, tracker, state)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


def _run_query(cfg: JobConfig, api: Any, tracker: Any, state: JobState) -> dict[str, Any] | None:
    from jobs.executors import SparkExecutorControl
    from jobs.hook import ScalingHook
    from jobs.warm import WarmTarget, warm_up

    spark = _spark(cfg)
    try:
        control = SparkExecutorControl(spark.sparkContext)
        target = WarmTarget(cfg.bootstrap, cfg.input, cfg.sink_bootstrap, cfg.dead_letter_topic)
        query = cfg.loaded_query()
        hook = ScalingHook(control, warmer=lambda tasks: warm_up(spark, tasks, target, _input_ends, query))
        if cfg.executors is not None and not control.local:
            removed = hook.settle(cfg.executors)
            if removed:
                log.info("removed executors %s launched beyond the target of %d", ",".join(removed), cfg.executors)
        api.hook = hook
        if not control.local:
            state.slots = hook.stream_slots
        return _stream(cfg, spark, control, tracker, state)
    finally:
        spark.stop()


def start_query(spark: Any, cfg: JobConfig, state: JobState) -> Any:
    """Start the job's streaming query on `spark`: the source parsing the rides (and dead-lettering bad
    records), the query `cfg.query` on the good ones, the exactly-once writer of its output."""
    from jobs.kafka_source import PARSE_RIDES, KafkaSource
    from jobs.query import check_output

    query = cfg.loaded_query()
    spark.dataSource.register(KafkaSource)
    reader = (
        spark.readStream.format("gesscale_kafka")
        .option("bootstrap", cfg.bootstrap)
        .option("topic", cfg.input)
        .option("maxRowsPerRange", str(cfg.max_rows_per_range))
        .option("startingOffsets", cfg.starting_offsets)
        .option("parse", PARSE_RIDES)
        .option("deadLetterTopic", cfg.dead_letter_topic)
        .option("deadLetterBootstrap", cfg.sink_bootstrap)
        .option("logDir", str(Path(cfg.checkpoint).resolve()))
    )
    if cfg.max_rows_per_batch:
        reader = reader.option("maxRowsPerBatch", str(cfg.max_rows_per_batch))
    try:
        out = query.build(reader.load())
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - the query's own code failed on the rides' schema
        raise UserError(f"query {query.name!r}: build() failed: {type(err).__name__}: {str(err)[:300]}") from err
    check_output(out, query)
    log.info("query %s: output keyed by %s", query.name, query.output_key)
    writer = (
        out.writeStream.queryName(f"gesscale-{query.name}")
        .foreachBatch(_batch_writer(cfg, state))
        .option("checkpointLocation", str(cfg.checkpoint))
    )
    if cfg.available_now:
        writer = writer.trigger(availableNow=True)
    elif cfg.trigger_ms > 0:
        writer = writer.trigger(processingTime=f"{cfg.trigger_ms} milliseconds")
    return writer.start()


def _stream(cfg: JobConfig, spark: Any, control: Any, tracker: Any, state: JobState) -> dict[str, Any] | None:
    from jobs.metrics import JsonLines

    spark.streams.addListener(
        _listener(tracker, control, state, JsonLines(cfg.metrics_jsonl) if cfg.metrics_jsonl else None))
    query = start_query(spark, cfg, state)
    state.last_rows_at = time.monotonic()
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
            status = query.status
            # before the first batch starts (planning, or a replay after a crash) a running trigger counts too
            if state.writing or status.get("isDataAvailable") or (state.batches == 0 and status.get("isTriggerActive")):
                state.last_rows_at = time.monotonic()
            idle = cfg.stop_when_idle_s
            if idle is not None and time.monotonic() - state.last_rows_at > idle:
                log.info("no new input for %.0f s: stopping", idle)
                break
        _stop_between_batches(query)
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        return tracker.latest_dict()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _stop_between_batches(query: Any, patience_s: float = 60.0) -> None:
    """Stop the query when no micro-batch is running (waiting at most `patience_s`), so none is cut short."""
    deadline = time.monotonic() + patience_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)
    if query.isActive:
        query.stop()
