"""The driver's HTTP API and the scaling hook, over a real socket, with an in-memory executor control.

The Spark-backed control is exercised against a real standalone cluster in test_standalone_scaling.py; here
an in-memory cluster stands in so that routes, auth and the waiting logic are checked quickly.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gesscale.batch_record import BatchRecord
from jobs.executors import ScalingUnsupported
from jobs.hook import WARM_RUNS, BadHookRequest, ScalingHook
from jobs.http_api import DriverApi, serve
from jobs.metrics import prometheus_text

TOKEN = "s3cret-token"
PORT = 18091


class InMemoryCluster:
    """Executors appear on the free hosts when the target rises (one per host), as a standalone master does."""

    def __init__(self, hosts: list[str], local: bool = False) -> None:
        self.free = list(hosts)
        self.running: list[dict[str, Any]] = []
        self._target: int | None = None
        self._next = 0
        self.local = local

    def executors(self) -> list[dict[str, Any]]:
        return list(self.running)

    def target(self) -> int | None:
        return self._target

    def set_target(self, n: int) -> None:
        if self.local:
            raise ScalingUnsupported("local master")
        self._target = n
        while len(self.running) < n and self.free:
            host = self.free.pop(0)
            self.running.append({"id": str(self._next), "host": host, "port": 4000})
            self._next += 1

    def kill(self, ids: list[str]) -> list[str]:
        gone = [e for e in self.running if e["id"] in ids]
        self.running = [e for e in self.running if e["id"] not in ids]
        self.free += [e["host"] for e in gone]
        self._target = max(0, (self._target or 0) - len(gone))
        return [e["id"] for e in gone]


OBS = {"time": 1.0, "batch_id": 4, "num_input_rows": 10, "input_rate": 5.0, "processed_rate": 7.5,
       "batch_duration_ms": 20, "backlog": 30, "held_back": True, "bp_upstream": 0.5, "bp_operator": 0.0,
       "bp_window_s": 60.0, "executors": [{"id": "0", "host": "127.0.0.21"}]}


@pytest.fixture
def api() -> Iterator[tuple[DriverApi, InMemoryCluster]]:
    cluster = InMemoryCluster(["127.0.0.21", "127.0.0.22"])
    cluster.set_target(1)
    metrics = prometheus_text(lambda: BatchRecord.from_dict(OBS))
    driver_api = DriverApi(lambda: OBS, metrics, ScalingHook(cluster, sleep=lambda s: None), TOKEN)
    server = serve(driver_api, "127.0.0.1", PORT)
    try:
        yield driver_api, cluster
    finally:
        server.shutdown()
        server.server_close()


def call(method: str, path: str, body: dict | None = None, token: str | None = TOKEN) -> tuple[int, Any]:
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


def test_metrics_and_observation_are_open(api: Any) -> None:
    status, text = call("GET", "/metrics", token=None)
    assert status == 200
    assert "gesscale_job_backlog 30.0" in text
    assert "gesscale_job_bp_upstream 0.5" in text
    assert 'gesscale_job_executor{host="127.0.0.21",id="0"} 1.0' in text
    assert call("GET", "/observation", token=None) == (200, OBS)


def test_hook_needs_the_token(api: Any) -> None:
    assert call("GET", "/executors", token=None)[0] == 401
    assert call("GET", "/executors", token="wrong")[0] == 401
    driver_api, _ = api
    driver_api.token = None
    status, body = call("GET", "/executors")
    assert status == 403 and "GESSCALE_JOB_TOKEN" in body["error"]


def test_add_then_remove_by_host(api: Any) -> None:
    status, body = call("POST", "/executors/add", {"host": "127.0.0.22", "wait_s": 1})
    assert status == 200
    assert body["on_requested_host"] is True
    assert [e["host"] for e in body["added"]] == ["127.0.0.22"]
    assert body["target"] == 2
    status, body = call("POST", "/executors/remove", {"host": "127.0.0.21"})
    assert status == 200 and body["gone"] is True
    assert [e["host"] for e in body["executors"]] == ["127.0.0.22"]
    assert body["target"] == 1
    status, body = call("GET", "/executors")
    assert status == 200 and body["target"] == 1


def test_bad_requests_are_400_and_unsupported_is_409(api: Any) -> None:
    assert call("POST", "/executors/remove", {"host": "10.0.0.9"})[0] == 400
    assert call("POST", "/executors/remove", {})[0] == 400
    assert call("POST", "/executors/target", {"target": -1})[0] == 400
    assert call("POST", "/executors/target", {})[0] == 400
    assert call("POST", "/nowhere", {})[0] == 404
    driver_api, _ = api
    driver_api.hook = ScalingHook(InMemoryCluster([], local=True), sleep=lambda s: None)
    assert call("POST", "/executors/target", {"target": 2})[0] == 409


def test_add_reports_when_the_executor_lands_elsewhere() -> None:
    cluster = InMemoryCluster(["a", "b"])
    ticks = iter(range(100))
    hook = ScalingHook(cluster, sleep=lambda s: None, clock=lambda: float(next(ticks)))
    result = hook.add(host="b", wait_s=3)
    assert result["on_requested_host"] is False
    assert [e["host"] for e in result["added"]] == ["a"]
    with pytest.raises(BadHookRequest):
        hook.remove()


def test_settle_trims_executors_launched_beyond_the_target() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    cluster.set_target(3)  # what a standalone master does when the application registers
    ticks = iter(range(1000))
    hook = ScalingHook(cluster, sleep=lambda s: None, clock=lambda: float(next(ticks)))
    assert hook.settle(1, wait_s=30, quiet_s=2) == ["1", "2"]
    assert [e["host"] for e in cluster.executors()] == ["a"] and cluster.target() == 1


def test_warm_runs_the_warmer_with_one_task_per_executor_and_reports_failures(api: Any) -> None:
    driver_api, cluster = api
    assert call("POST", "/executors/warm", {})[0] == 400  # this hook has no warm-up
    asked: list[int] = []

    def warmer(tasks: int) -> dict[str, Any]:
        asked.append(tasks)
        return {"tasks": tasks, "rows": tasks, "warm_s": 1.5}

    driver_api.hook = ScalingHook(cluster, sleep=lambda s: None, warmer=warmer)
    call("POST", "/executors/add", {"wait_s": 1})
    status, body = call("POST", "/executors/warm", {})
    assert status == 200 and body["ok"] is True and body["warm_s"] == 1.5
    assert asked == [2] and len(body["executors"]) == 2

    def broken(tasks: int) -> dict[str, Any]:
        raise RuntimeError("executor 1 lost")

    driver_api.hook = ScalingHook(cluster, sleep=lambda s: None, warmer=broken)
    status, body = call("POST", "/executors/warm", {})
    assert status == 200 and body["ok"] is False and "executor 1 lost" in body["error"]
    assert call("POST", "/executors/warm", {}, token=None)[0] == 401


class FakeTime:
    """A clock that only moves when slept on."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, s: float) -> None:
        self.now += s

    def clock(self) -> float:
        return self.now


def test_add_with_warm_holds_the_stream_to_the_old_executors_until_the_new_one_is_warm() -> None:
    cluster = InMemoryCluster(["a", "b"])
    cluster.set_target(1)
    t = FakeTime()
    seen_while_warming: list[int | None] = []
    hook: ScalingHook

    def warmer(tasks: int) -> dict[str, Any]:
        t.sleep(0.5)  # the submitted job runs a while: the stream may go on, on the old executor only
        seen_while_warming.append(hook.stream_slots())
        return {"tasks": tasks, "rows": tasks, "warm_s": 9.0}

    hook = ScalingHook(cluster, sleep=t.sleep, clock=t.clock, warmer=warmer)
    assert hook.stream_slots() == 1
    result = hook.add(host="b", wait_s=5, warm=True)
    assert result["on_requested_host"] is True and result["warm"]["ok"] is True and result["warm"]["tasks"] == 2
    assert seen_while_warming == [1]
    assert hook.stream_slots() == 2  # warm: it counts now
    hook.add(host=None, wait_s=0, warm=True)  # nothing free: no executor, no warm-up, nothing held afterwards
    assert hook.stream_slots() == 2


def test_add_with_warm_runs_a_failed_warm_up_once_more_and_reports_both_attempts() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    cluster.set_target(1)
    outcomes = [RuntimeError("task lost"), None, RuntimeError("again"), RuntimeError("and again")]

    def warmer(tasks: int) -> dict[str, Any]:
        err = outcomes.pop(0)
        if err is not None:
            raise err
        return {"tasks": tasks, "rows": tasks, "warm_s": 2.0}

    hook = ScalingHook(cluster, sleep=lambda s: None, warmer=warmer)
    first = hook.add(host="b", wait_s=5, warm=True)["warm"]
    assert first["ok"] is True and first["attempts"] == 2 and first["errors"] == ["RuntimeError: task lost"]
    second = hook.add(host="c", wait_s=5, warm=True)["warm"]  # failed twice: reported, not raised
    assert second["ok"] is False and second["attempts"] == 2 and len(second["errors"]) == 2
    assert hook.stream_slots() == 3  # nothing held afterwards either way


class TaskCountingCluster(InMemoryCluster):
    """Counts the tasks each executor started, as the UI's REST API does."""

    def executors(self) -> list[dict[str, Any]]:
        return [{**e, "tasks": e.setdefault("tasks", 0)} for e in self.running]


def test_add_with_warm_runs_the_warm_up_again_until_a_task_started_on_the_new_executor() -> None:
    cluster = TaskCountingCluster(["a", "b"])
    cluster.set_target(1)
    cluster.running[0]["tasks"] = 50  # the old executor is long up
    slots_while_warming: list[int | None] = []
    hook: ScalingHook

    def warmer(tasks: int) -> dict[str, Any]:
        new = cluster.running[-1]
        runs = len(slots_while_warming) + 1
        if runs == 3:  # the first two found only the old executor free; the third got the new one's core
            new["tasks"] += 1
        slots_while_warming.append(hook.stream_slots(patience_s=0.0))
        return {"tasks": tasks, "rows": tasks, "warm_s": 0.1}

    hook = ScalingHook(cluster, sleep=lambda s: None, warmer=warmer)
    warm = hook.add(host="b", wait_s=5, warm=True)["warm"]
    assert warm["ok"] is True and warm["attempts"] == 3 and warm["on_new_executor"] is True
    assert slots_while_warming == [1, 1, 1]  # the stream keeps to the old executor throughout
    assert hook.stream_slots() == 2


def _mid_add(cluster: InMemoryCluster) -> tuple[FakeTime, ScalingHook]:
    """A hook in the middle of `add(warm=True)` on a one-executor cluster whose new executor just registered."""
    cluster.set_target(1)
    t = FakeTime()
    hook = ScalingHook(cluster, sleep=t.sleep, clock=t.clock)
    hook._held = {"0"}  # an add(warm=True) under way, the way `add` sets it
    cluster.set_target(2)  # the new executor is listed; nothing runs on it yet, no warm-up submitted yet
    return t, hook


def test_a_batch_waits_until_a_task_started_on_the_new_executor() -> None:
    cluster = TaskCountingCluster(["a", "b"])
    t, hook = _mid_add(cluster)
    hook._mark_warm_submitted()  # submitted, but its tasks may all have gone to the old executor
    cluster.running[-1]["port"] = 0  # no block manager yet: its core cannot be offered, the stream goes on
    assert hook.stream_slots(patience_s=3.0) == 1 and t.now == 0.0
    cluster.running[-1]["port"] = 4000  # registered: its core may be offered any moment
    assert hook.stream_slots(patience_s=3.0) == 1
    assert t.now >= 3.0  # it waited its patience out: submitted is not enough when tasks are counted
    cluster.running[-1]["tasks"] = 1  # the warm-up's task holds the new core
    start = t.now
    assert hook.stream_slots(patience_s=3.0) == 1 and t.now == start  # at once


def test_add_with_warm_runs_again_only_once_the_block_manager_registered() -> None:
    cluster = TaskCountingCluster(["a", "b"])
    cluster.set_target(1)
    ports_at_run: list[int] = []
    listings = 0

    def executors() -> list[dict[str, Any]]:
        nonlocal listings
        listings += 1
        if listings == 40 and len(cluster.running) > 1:  # the block manager registers a while after the listing
            cluster.running[-1]["port"] = 4000
        return TaskCountingCluster.executors(cluster)

    def warmer(tasks: int) -> dict[str, Any]:
        new = cluster.running[-1]
        ports_at_run.append(new["port"])
        if new["port"]:
            new["tasks"] += 1  # launched: the warm-up's task gets its core
        return {"tasks": tasks, "rows": tasks, "warm_s": 0.1}

    cluster.executors = executors  # type: ignore[method-assign]
    hook = ScalingHook(cluster, sleep=lambda s: None, warmer=warmer)
    cluster.running.append({"id": "9", "host": "b", "port": 0})  # listed, no block manager yet
    warm = hook._warm_new({"9"}, deadline=time.monotonic() + 5)
    assert ports_at_run == [0, 4000]  # once at the listing, then not again until the block manager is there
    assert warm["attempts"] == 2 and warm["on_new_executor"] is True


def test_add_with_warm_gives_up_after_a_bounded_number_of_warm_ups() -> None:
    cluster = TaskCountingCluster(["a", "b"])
    cluster.set_target(1)
    hook = ScalingHook(cluster, sleep=lambda s: None,
                       warmer=lambda tasks: {"tasks": tasks, "rows": tasks, "warm_s": 0.1})  # never reaches it
    warm = hook.add(host="b", wait_s=5, warm=True)["warm"]
    assert warm["ok"] is True and warm["on_new_executor"] is False and warm["attempts"] == WARM_RUNS
    assert hook.stream_slots() == 2  # it counts anyway: the stream is not held forever


def test_a_batch_waits_for_the_warm_up_to_be_queued_when_the_new_executor_is_already_there() -> None:
    t, hook = _mid_add(InMemoryCluster(["a", "b"]))
    assert hook.stream_slots(settle_s=0.3, patience_s=2.0) == 1
    assert t.now >= 2.0  # it waited its patience out
    hook._mark_warm_submitted()
    start = t.now
    assert hook.stream_slots(settle_s=0.3, patience_s=2.0) == 1
    assert 0.3 <= t.now - start < 0.5  # only until the job had `settle_s` to reach Spark's queue
    assert ScalingHook(InMemoryCluster(["a"], local=True)).stream_slots() is None
