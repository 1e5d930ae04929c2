"""Start and stop Spark standalone daemons (master, workers) from the pyspark installation.

pyspark from PyPI has `bin/spark-class` but no `sbin/start-*.sh`, so daemons are launched directly as
`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`, each in its own process group so it
can be stopped with everything it started (executors, Python workers); `gesscale.process` starts, waits for and
stops them.

Each daemon and its web UI bind to the daemon's own address only (`--host` and `SPARK_LOCAL_IP`; Spark's UIs would
otherwise listen on every interface). With `secured_conf` (`jobs/spark_security.py`) the daemon requires the
run's secret of every RPC client and runs without kill links or REST submission server.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from gesscale.errors import UserError
from gesscale.process import ManagedProcess, port_answers, port_is_free, spawn
from jobs.cds import BASE_OPTIONS
from jobs.cds import java_options as cds_options
from jobs.spark_security import bind_env, daemon_args


def spark_home() -> Path:
    """The folder of the installed pyspark (it is a complete SPARK_HOME)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Daemon:
    """A running master or worker: where it listens and its process (signals reach its whole process group)."""

    name: str
    host: str
    port: int
    process: ManagedProcess
    log: Path

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the daemon's process group, SIGKILL it if it lingers."""
        self.process.stop(timeout_s)


def _launch(name: str, cls: str, args: list[str], host: str, port: int, work: Path, timeout_s: float,
            cgroup_procs: Path | None = None, secured_conf: Path | None = None) -> Daemon:
    if not port_is_free(port, host):
        raise UserError(f"cannot start Spark {name}: {host}:{port} is taken")
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{name}.log"
    env = dict(os.environ)
    env.update(SPARK_HOME=str(spark_home()), PYSPARK_PYTHON=env.get("PYSPARK_PYTHON", sys.executable),
               SPARK_LOG_DIR=str(work), SPARK_WORKER_DIR=str(work / "work"))
    env.update(bind_env(host, secured_conf))  # the web UI on the daemon's own address; the secured settings
    # Master and worker daemons do little work: C1 only and the serial GC start them faster on a small machine,
    # and so do Spark's classes from the class-data archive when there is one (jobs/cds.py).
    env.setdefault("SPARK_DAEMON_JAVA_OPTS", f"{BASE_OPTIONS} {cds_options()}".strip())
    argv = [str(spark_home() / "bin" / "spark-class"), cls, *args, *daemon_args(secured_conf)]
    if cgroup_procs is not None:  # join the cgroup before the JVM starts, so that all it opens belongs to it
        argv = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(cgroup_procs), *argv]
    daemon = Daemon(name, host, port, spawn(argv, log, env=env, group=True, truncate=True), log)
    try:
        ready = daemon.process.wait_until(lambda: port_answers(port, host), f"Spark {name}", timeout_s, poll_s=0.2)
    except BaseException:
        daemon.stop()
        raise
    if not ready:
        daemon.stop()
        raise UserError(f"Spark {name} did not listen on {host}:{port} within {timeout_s:.0f} s; see {log}")
    return daemon


def start_master(host: str, port: int, ui_port: int, work: Path, timeout_s: float = 60.0,
                 secured_conf: Path | None = None) -> Daemon:
    """Start a standalone master on host:port (UI on host:ui_port); its URL is `spark://host:port`. With
    `secured_conf` (`jobs.spark_security.create`) it requires the run's secret of every client."""
    return _launch("master", "org.apache.spark.deploy.master.Master",
                   ["--host", host, "--port", str(port), "--webui-port", str(ui_port)], host, port, work, timeout_s,
                   secured_conf=secured_conf)


def start_worker(master_url: str, host: str, port: int, ui_port: int, work: Path, cores: int = 1,
                 memory: str = "1g", timeout_s: float = 60.0, cgroup_procs: Path | None = None,
                 secured_conf: Path | None = None) -> Daemon:
    """Start a worker bound to `host` offering `cores` cores to the master at `master_url` (inside the cgroup
    whose `cgroup.procs` file is given, with everything it launches); `secured_conf` as for `start_master`."""
    return _launch(f"worker-{host}", "org.apache.spark.deploy.worker.Worker",
                   ["--host", host, "--port", str(port), "--webui-port", str(ui_port), "--cores", str(cores),
                    "--memory", memory, "--work-dir", str(work / "work"), master_url],
                   host, port, work, timeout_s, cgroup_procs, secured_conf)
