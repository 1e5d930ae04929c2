"""The streaming job of the local testbed: `gesscale job run` as a child process against the fleet's master.

The job writes one observation per micro-batch to `<run_dir>/batches.jsonl` (the exact record of what was
processed and when) and serves its scaling hook on the driver's HTTP API with a random bearer token kept in the
fleet's state file. `stop()` stops it cleanly between micro-batches (SIGTERM: the checkpoint holds the offsets),
which is also the first half of the `restart` strategy.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gesscale.batch_record import BatchRecord, BatchRecordError
from gesscale.errors import UserError
from gesscale.process import ManagedProcess, log_tail, port_is_free, spawn
from jobs import spark_security
from jobs.cds import BASE_OPTIONS
from jobs.hook_client import HttpDriverHook
from jobs.spark_security import bind_env

DRIVER_HOST = "127.0.0.1"  # driver RPC, block manager, UI and the hook: loopback only

# JVM options of the executors on budgeted fog nodes. Inside a quarter-core CFS quota the C2 JIT compiler and
# the parallel GC threads compete with the first tasks for the quota; C1 only and the serial collector halved a
# live-added executor's cold start here (pause 56.8 s -> 25.6 s; 2000-row batches on 2 nodes 5.6-6.6 s -> 3.4-4.1 s,
# measured on this machine, the second run under heavier load). docs/testbed.md.
FOG_EXECUTOR_JAVA_OPTIONS = BASE_OPTIONS  # one definition, shared with the daemons (jobs/cds.py)


def _fog_spark_conf() -> dict[str, str]:
    """Executors: the fog JVM options and the class-data archive (jobs/cds.py) when there is one; the driver:
    the archive too (it starts sooner, which a restart also gains from)."""
    from jobs.cds import java_options

    cds = java_options()
    conf = {"spark.executor.extraJavaOptions": f"{FOG_EXECUTOR_JAVA_OPTIONS} {cds}".strip()}
    if cds:
        conf["spark.driver.extraJavaOptions"] = cds
    return conf


@dataclass
class JobSettings:
    """How the testbed's job runs; stored in the fleet state so an attached controller finds it."""

    bootstrap: str
    input: str = "rides"
    output: str = "rides-enriched"
    dead_letter: str = "rides-dead-letter"
    http_port: int = 15080
    ui_port: int = 15040
    max_rows_per_batch: int = 2000
    max_rows_per_range: int = 500
    bp_window_s: float = 10.0
    token: str = ""
    pid: int | None = None
    spark_conf: dict[str, str] = field(default_factory=_fog_spark_conf)  # extra Spark settings (`--conf`)
    query: str = "nearest-landmark"  # the job's `--query` (docs/queries.md)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


class TestbedJob:
    """Start, stop and talk to the job process of one testbed run."""

    def __init__(self, run_dir: Path, master_url: str, settings: JobSettings) -> None:
        self.run_dir = Path(run_dir)
        self.master_url = master_url
        self.settings = settings
        if not settings.token:
            settings.token = secrets.token_hex(16)
        self.batches_path = self.run_dir / "batches.jsonl"
        self.checkpoint = self.run_dir / "checkpoint"
        self.log_path = self.run_dir / "job.log"
        self._process: ManagedProcess | None = None

    @property
    def hook(self) -> HttpDriverHook:
        """Client of the driver's API (observation, executors, target, remove)."""
        return HttpDriverHook(f"http://127.0.0.1:{self.settings.http_port}", self.settings.token, timeout_s=20.0)

    def argv(self, executors: int) -> list[str]:
        """The `gesscale job run` command line for `executors` initial executors."""
        s = self.settings
        return [
            sys.executable, "-m", "gesscale", "job", "run", "--bootstrap", s.bootstrap, "--input", s.input,
            "--output", s.output, "--dead-letter", s.dead_letter, "--checkpoint", str(self.checkpoint),
            "--master", self.master_url, "--executors", str(executors), "--driver-host", DRIVER_HOST,
            "--http-port", str(s.http_port), "--ui-port", str(s.ui_port),
            "--max-rows-per-batch", str(s.max_rows_per_batch), "--max-rows-per-range", str(s.max_rows_per_range),
            "--metrics-jsonl", str(self.batches_path), "--bp-window-s", str(s.bp_window_s), "--query", s.query,
            *[arg for k, v in sorted(s.spark_conf.items()) for arg in ("--conf", f"{k}={v}")],
        ]

    @property
    def process(self) -> ManagedProcess | None:
        """The job's process: the one this object started, else the one its settings name (an attached controller,
        which recognises it by its command line: `job` and this run's checkpoint)."""
        pid = self.settings.pid
        if pid is None:
            return None
        if self._process is not None and self._process.pid == pid:
            return self._process
        return ManagedProcess(pid, [], self.log_path, owns=lambda argv: "job" in argv and str(self.checkpoint) in argv)

    def alive(self) -> bool:
        """True while the job process runs."""
        process = self.process
        return process is not None and process.alive()

    def start(self, executors: int) -> int:
        """Launch the job with `executors` executors; returns its PID once the driver's API answers."""
        for port in (self.settings.http_port, self.settings.ui_port):
            if not port_is_free(port):
                raise UserError(f"port {port} for the job is taken (another testbed running?)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GESSCALE_JOB_TOKEN": self.settings.token, "PYSPARK_PYTHON": sys.executable,
               # driver UI and RPC on 127.0.0.1 only; the fleet's secret from its 0600 conf (jobs/spark_security.py)
               **bind_env(DRIVER_HOST, spark_security.existing(self.run_dir))}
        self._process = spawn(self.argv(executors), self.log_path, env=env)
        self.settings.pid = self._process.pid
        return self._process.pid

    def wait_ready(self, executors: int, timeout_s: float = 180.0) -> None:
        """Block until the driver's hook answers with `executors` executors; UserError on exit or timeout."""
        hook = self.hook

        def ready() -> bool:
            with contextlib.suppress(Exception):
                return len(hook.executors()["executors"]) == executors
            return False

        process = self.process
        if process is None:
            raise UserError(f"the job is not running; see {self.log_path}: {self.log_tail()}")
        if not process.wait_until(ready, "the job", timeout_s, poll_s=0.5):
            raise UserError(f"the job did not get {executors} executors within {timeout_s:.0f} s; see {self.log_path}")

    def stop(self, timeout_s: float = 90.0) -> None:
        """Stop the job between micro-batches (SIGTERM), SIGKILL its process group if it lingers (the driver's JVM
        and anything it left)."""
        process = self.process
        if process is not None:
            process.stop(timeout_s, sweep_group=True)
        self.settings.pid = None

    def log_tail(self, lines: int = 3) -> str:
        """Last lines of the job's log."""
        return log_tail(self.log_path, lines)


def read_batches(path: Path, offset: int = 0) -> tuple[list[BatchRecord], int]:
    """Batch records appended to `path` from byte `offset`; returns them and the offset after the last full line.

    A line that is not JSON (a torn write) is skipped; a JSON line that is not a batch record raises
    `BatchRecordError` naming the file."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    out = []
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        try:
            out.append(BatchRecord.from_dict(d))
        except BatchRecordError as err:
            raise BatchRecordError(f"{path}: {err}") from None
    return out, offset + end
