"""Least privilege for a Spark standalone cluster on this machine: authentication with a per-run secret, no kill
links, no REST submission server, every daemon and web UI bound to its own loopback address.

Why and how (Spark 4, `pyspark` from PyPI):
- `spark.authenticate=true` makes every Spark RPC connection (master, workers, driver, block managers, executors)
  start with a shared-secret handshake: a client without the secret cannot register an application or an
  executor. In standalone mode every JVM must know the secret through its own configuration, so it lives in a
  per-run `spark-defaults.conf` (mode 0600 in a 0700 folder) that master and workers read with
  `--properties-file` and the driver's `spark-submit` with `--properties-file` in `PYSPARK_SUBMIT_ARGS`; the
  secret itself is never on a command line that `ps` shows. Not through `SPARK_CONF_DIR`: Spark puts that
  folder first on every JVM's class path, and a class path that differs from the one the class-data archive
  was written with (`jobs/cds.py`) makes every Spark JVM start without the archive (seen 2026-11-24: the
  demo's testbed took 55-63 s to come up instead of ~21 s). A worker hands it to
  the executors it launches through their environment (`_SPARK_AUTH_SECRET`, Spark's own mechanism), and the
  driver leaves it out of the executors' command line (Spark filters it).
- `spark.ui.killEnabled=false`: the UIs' kill links do nothing. `spark.master.rest.enabled=false`: no REST
  submission server (port 6066), which runs code for anyone who can reach it. The master UI's "decommission
  workers" endpoint is refused too (`spark.master.ui.decommission.allow.mode=DENY`).
- Spark's web UIs bind to `SPARK_LOCAL_IP` (else every interface); `bind_env(host)` sets it to the daemon's own
  address. The RPC servers bind to `--host` (master, worker) and `spark.driver.bindAddress` (driver).

The UIs have no authentication of their own (Spark's needs a servlet filter): bound to loopback they are visible to
local users only, read-only (kill disabled), and the Environment page redacts the secret
(`spark.redaction.regex` matches "secret").
"""

from __future__ import annotations

import os
import secrets
import shlex
from pathlib import Path

CONF_DIR_NAME = "spark-conf"
DEFAULTS_FILE = "spark-defaults.conf"

# Settings that hold for every JVM of a secured cluster (the secret is added per run).
SECURE_SETTINGS: dict[str, str] = {
    "spark.authenticate": "true",
    "spark.ui.killEnabled": "false",
    "spark.master.rest.enabled": "false",
    "spark.master.ui.decommission.allow.mode": "DENY",
}


def defaults_text(secret: str) -> str:
    """The `spark-defaults.conf` of a secured cluster with `secret` (pure)."""
    if not secret or any(ch.isspace() for ch in secret):
        raise ValueError("the secret must be a non-empty string without white space")
    lines = [f"{k} {v}" for k, v in SECURE_SETTINGS.items()]
    lines.append(f"spark.authenticate.secret {secret}")
    return "\n".join(lines) + "\n"


def conf_dir(run_dir: Path) -> Path:
    """Where the run in `run_dir` keeps its secured Spark settings (read with `--properties-file`)."""
    return Path(run_dir) / CONF_DIR_NAME


def create(run_dir: Path) -> Path:
    """Write a fresh per-run secret and the secure settings under `run_dir`; returns the conf folder.

    The folder is 0700 and the file 0600 from the moment they exist (created with those modes, not chmod-ed
    afterwards), so no other local user can read the secret at any time.
    """
    folder = conf_dir(run_dir)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / DEFAULTS_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(defaults_text(secrets.token_hex(32)))
    return folder


def existing(run_dir: Path) -> Path | None:
    """The run's conf folder when `create` made one, else None (an unsecured cluster)."""
    folder = conf_dir(run_dir)
    return folder if (folder / DEFAULTS_FILE).is_file() else None


def bind_env(host: str, secured_conf: Path | None) -> dict[str, str]:
    """Environment for a Spark JVM bound to `host`: its web UI there (`SPARK_LOCAL_IP`) and, when
    `secured_conf` is given, the secured settings for a PySpark driver (`PYSPARK_SUBMIT_ARGS`, which PySpark
    hands to `spark-submit`; master and workers take `daemon_args` instead)."""
    env = {"SPARK_LOCAL_IP": host}
    if secured_conf is not None:
        env["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(str(secured_conf / DEFAULTS_FILE))} pyspark-shell"
    return env


def daemon_args(secured_conf: Path | None) -> list[str]:
    """Arguments of a standalone master or worker that make it read the secured settings."""
    return [] if secured_conf is None else ["--properties-file", str(secured_conf / DEFAULTS_FILE)]
