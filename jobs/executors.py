"""Executor control of a running Spark application: list executors, set the target, kill by id or host.

`ExecutorControl` is the narrow interface the scaling hook uses; `SparkExecutorControl` implements it with the
mechanism measured in docs/job.md: `SparkContext.requestTotalExecutors(N, 0, {})` to set how many executors the
application wants, `killExecutors(ids)` to remove given executors (which also lowers the target), and the UI's
REST API `/api/v1/applications/{id}/executors` for ids and hosts.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any, Protocol


class ScalingUnsupported(RuntimeError):
    """The cluster manager cannot change executors (e.g. `local[N]`, where tasks run inside the driver)."""


class ExecutorControl(Protocol):
    """What the scaling hook and the metrics need from the application."""

    def executors(self) -> list[dict[str, Any]]:
        """Active executors as `{"id", "host", "port"}` (port 0 until the executor's block manager registered),
        with `tasks` (tasks it has run or runs) when known; in local mode the driver itself (id `driver`)."""
        ...

    def target(self) -> int | None:
        """The executor target last set through this control, or None if never set."""
        ...

    def set_target(self, n: int) -> None:
        """Ask the cluster manager for `n` executors in total."""
        ...

    def kill(self, ids: list[str]) -> list[str]:
        """Remove the given executors; returns the ids the cluster manager accepted."""
        ...


def _host_port(host_port: str) -> tuple[str, int]:
    host, _, port = host_port.rpartition(":")
    return (host or host_port), int(port) if port.isdigit() else 0


class SparkExecutorControl:
    """`ExecutorControl` over a live `SparkContext` (classic PySpark, py4j)."""

    def __init__(self, sc: Any) -> None:
        self._sc = sc
        self._target: int | None = None
        self._lock = threading.Lock()

    @property
    def local(self) -> bool:
        """True for `local[...]` masters, where executors cannot be added or removed."""
        return str(self._sc.master).startswith("local")

    def executors(self) -> list[dict[str, Any]]:
        """Active executors from the UI REST API; in local mode the driver, without asking the UI."""
        if self.local:
            host = self._sc.getConf().get("spark.driver.host", "localhost")
            return [{"id": "driver", "host": host, "port": 0}]
        url = f"{self._sc.uiWebUrl}/api/v1/applications/{self._sc.applicationId}/executors"
        with urllib.request.urlopen(url, timeout=60) as resp:
            rows = json.load(resp)
        out = []
        for row in rows:
            if row.get("id") == "driver" or not row.get("isActive", True):
                continue
            host, port = _host_port(row.get("hostPort", ""))
            out.append({"id": str(row["id"]), "host": host, "port": port, "tasks": int(row.get("totalTasks") or 0)})
        return sorted(out, key=lambda e: (len(e["id"]), e["id"]))

    def target(self) -> int | None:
        """The target last set here (Spark has no public getter)."""
        return self._target

    def set_target(self, n: int) -> None:
        """`requestTotalExecutors(n, 0, {})`."""
        if self.local:
            raise ScalingUnsupported("the master is local[...]: executors cannot be added or removed")
        if n < 0:
            raise ValueError("target must be >= 0")
        jvm = self._sc._jvm
        empty = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
        with self._lock:
            if not self._sc._jsc.sc().requestTotalExecutors(n, 0, empty):
                raise ScalingUnsupported("the cluster manager refused requestTotalExecutors")
            self._target = n

    def kill(self, ids: list[str]) -> list[str]:
        """`killExecutors(ids)`: removes them and lowers the target by as many."""
        if self.local:
            raise ScalingUnsupported("the master is local[...]: executors cannot be added or removed")
        if not ids:
            return []
        jvm = self._sc._jvm
        jids = jvm.java.util.ArrayList()
        for i in ids:
            jids.add(str(i))
        with self._lock:
            ok = self._sc._jsc.sc().killExecutors(jvm.org.apache.spark.api.python.PythonUtils.toSeq(jids))
            if not ok:
                return []
            if self._target is not None:
                self._target = max(0, self._target - len(ids))
        return list(ids)
