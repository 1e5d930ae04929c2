"""PySpark's Python worker daemon, with the job's modules imported once before it forks any worker.

An executor starts one daemon (`python -m <spark.python.daemon.module> pyspark.worker`) and forks a worker
from it for every Python task that finds no idle one; a micro-batch task needs two at once (the Kafka source's
read and the writer's `mapInArrow`). Stock `pyspark.daemon` imports almost nothing, so each new worker imports
pyarrow, kafka-python, msgspec, lz4 and the job's modules itself: about 0.75 CPU-s, which inside a quarter-core
fog node took 7 s for the reader's worker and 14 s for the writer's in a live scale-up of the demo (both
competing for the quota; executor log, "init" of the first task). Imported here, a forked worker inherits them.

PySpark's daemon avoids imports before fork because pyarrow starts native threads when imported. Two remain
here: jemalloc's background thread, switched off below (`JE_ARROW_MALLOC_CONF`; pyarrow's default pool is
mimalloc anyway), and one of Arrow's, which Arrow's own at-fork handlers keep consistent in the child. The
job's tests (exactly once across kill -9, live scaling on a standalone cluster) run with this daemon.

`jobs/job.py` sets `spark.python.daemon.module` to this module unless the job's `--conf` names another.
"""

from __future__ import annotations

import os

PRELOAD = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyarrow",
    "pyarrow.ipc",
    "kafka",
    "msgspec",
    "lz4.frame",
    "jobs.kafka_source",
    "jobs.kafka_sink",
    "jobs.records",
)


def preload() -> list[str]:
    """Import `PRELOAD`; the names that could not be imported (a worker then imports what it needs itself)."""
    import importlib

    missing = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a preload is an optimisation, never a reason for the daemon to fail
            missing.append(name)
    return missing


def main() -> None:
    """Preload, then run PySpark's own daemon loop (it reads the worker module from `sys.argv[1]`)."""
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
