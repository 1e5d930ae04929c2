"""The scaling hook's operations, on top of an `ExecutorControl` (no HTTP here; see `jobs.http_api`).

`add` raises the target by one and waits for the new executor, so a backend that has made a chosen node the
only place with a free slot (a worker started there, or a Kubernetes node label) gets its executor there and
learns where it landed. `remove` kills the executors of a host (or given ids) and waits until they are gone.
`warm` runs the warm-up job of `jobs.warm`, so that a just-added executor pays its cold start before the
stream's micro-batches reach it.

`add(..., warm=True)` keeps the stream's tasks off the new executor until the warm-up holds its core. A
micro-batch has as many tasks as `stream_slots()` says (the job coalesces its input to it): while the add is
under way only the executors from before count, so no task of the stream ever waits for a core. That is not
enough: Spark hands a free core to whichever task is queued, and the new executor's core becomes free the
moment it has built its block manager and reported itself launched, seconds after it is listed (a cold JVM in
a small budget). A micro-batch queued at that moment would put one of its tasks there, and the whole batch
would wait for the cold start (16-22 s at a quarter core, seen in the demo). So once the new executor is listed
the hook submits the warm-up job, and submits it again while its tasks find only the old executors free (each
time once the new executor's block manager is registered: its port shows in the listing just before its core
is offered). From that moment on, the stream's next micro-batch waits (at most `patience_s`) until the listing
shows a task started on the new executor: the warm-up's, which then holds that core for the cold start while
the stream goes on, on the old executors. When the warm-up is done, the new executor counts. A control that
does not count tasks per executor falls back to waiting until the warm-up job was submitted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from jobs.executors import ExecutorControl

log = logging.getLogger(__name__)
WARM_ATTEMPTS = 2  # a warm-up that failed once (a task lost to a cold executor's first Kafka fetch) is run again
WARM_RUNS = 40  # warm-ups in all while the new executor has started no task yet (module docstring)
WARM_RETRY_S = 0.1


class BadHookRequest(ValueError):
    """A request the hook cannot serve as asked (unknown host, bad value); becomes HTTP 400/409."""


class ScalingHook:
    """Add, remove and retarget executors of the running application, waiting for the change to show."""

    def __init__(self, control: ExecutorControl, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, poll_s: float = 0.25,
                 warmer: Callable[[int], dict[str, Any]] | None = None) -> None:
        self.control = control
        self._warmer = warmer
        self._sleep = sleep
        self._clock = clock
        self._poll_s = poll_s
        # during add(warm=True): the executor ids from before, and when the warm-up job was submitted
        self._held: set[str] | None = None
        self._warm_submitted_at: float | None = None
        self._lock = threading.Lock()

    def status(self) -> dict[str, Any]:
        """Current executors and target."""
        return {"target": self.control.target(), "executors": self.control.executors()}

    def _wait(self, done: Callable[[list[dict[str, Any]]], bool], wait_s: float) -> tuple[bool, list[dict]]:
        deadline = self._clock() + max(0.0, wait_s)
        while True:
            current = self.control.executors()
            if done(current) or self._clock() >= deadline:
                return done(current), current
            self._sleep(self._poll_s)

    def set_target(self, target: int, wait_s: float = 0.0) -> dict[str, Any]:
        """Set the executor target; wait up to `wait_s` until that many executors are active."""
        if target < 0:
            raise BadHookRequest("target must be >= 0")
        self.control.set_target(target)
        reached, current = self._wait(lambda ex: len(ex) == target, wait_s)
        return {"target": target, "reached": reached, "executors": current}

    def add(self, host: str | None = None, wait_s: float = 60.0, warm: bool = False) -> dict[str, Any]:
        """Target + 1; wait up to `wait_s` for a new executor (on `host`, when given). With `warm`, hold the
        stream to the executors from before until the warm-up job has run on the new one (module docstring)."""
        before = self.control.executors()
        known = {e["id"] for e in before}
        current_target = self.control.target()
        base = len(before) if current_target is None else max(current_target, len(before))
        if warm:
            with self._lock:
                self._held, self._warm_submitted_at = set(known), None
        try:
            self.control.set_target(base + 1)

            def arrived(ex: list[dict[str, Any]]) -> bool:
                return any(e["id"] not in known and (host is None or e["host"] == host) for e in ex)

            ok, current = self._wait(arrived, wait_s)
            new = [e for e in current if e["id"] not in known]
            result = {"target": base + 1, "added": new, "on_requested_host": ok, "executors": current}
            if warm and new:
                result["warm"] = self._warm_new({e["id"] for e in new}, self._clock() + max(0.0, wait_s))
            return result
        finally:
            if warm:
                with self._lock:
                    self._held = self._warm_submitted_at = None

    def _warm_new(self, new_ids: set[str], deadline: float) -> dict[str, Any]:
        """The warm-up of `add(warm=True)`, until the new executors have run a task of it (module docstring);
        a warm-up that fails is run once more. Errors are logged and kept."""
        if self._warmer is None:
            return {"ok": False, "error": "this job has no warm-up"}

        errors: list[str] = []
        runs = 0
        while True:
            figures = self.warm(on_submit=self._mark_warm_submitted)
            runs += 1
            if not figures["ok"]:
                errors.append(figures["error"])
                log.warning("warm-up attempt %d failed: %s", runs, figures["error"])
            reached = _started_a_task([e for e in self.control.executors() if e["id"] in new_ids])
            if figures["ok"] and reached is not False:
                break
            if len(errors) >= WARM_ATTEMPTS or runs >= WARM_RUNS or self._clock() >= deadline:
                break
            if figures["ok"]:
                log.info("warm-up %d ran on the old executors only; once more", runs)
            # no core of the new executor can be offered before its block manager registered: run again then
            self._wait(lambda ex: all(_registered(e) for e in ex if e["id"] in new_ids), deadline - self._clock())
            self._sleep(WARM_RETRY_S)
        return {**figures, "attempts": runs, "errors": errors, "on_new_executor": reached}

    def _mark_warm_submitted(self) -> None:
        with self._lock:
            self._warm_submitted_at = self._clock()

    def stream_slots(self, settle_s: float = 0.3, patience_s: float = 10.0) -> int | None:
        """How many tasks the next micro-batch should have: one per executor that counts (all of them, except
        a new one during `add(warm=True)`); None in local mode (no limit).

        While a new executor has registered its block manager (so Spark may offer its core any moment) but no
        task has started on it yet (the warm-up's should), wait, at most `patience_s` (module docstring).
        Without task counts: wait until the warm-up job was submitted `settle_s` ago."""
        if getattr(self.control, "local", False):
            return None
        deadline = self._clock() + patience_s
        while True:
            current = self.control.executors()
            with self._lock:
                held, submitted = self._held, self._warm_submitted_at
            if held is None:
                return max(1, len(current))
            counted = [e for e in current if e["id"] in held]
            newcomers = [e for e in current if e["id"] not in held]
            launching = [e for e in newcomers if _registered(e)]
            started = _started_a_task(launching)
            ready = (submitted is not None and self._clock() - submitted >= settle_s) if started is None else started
            if not launching or ready or self._clock() >= deadline:
                return max(1, len(counted))
            self._sleep(min(self._poll_s, 0.05))

    def remove(self, host: str | None = None, ids: list[str] | None = None, wait_s: float = 30.0) -> dict[str, Any]:
        """Kill the executors on `host` (or with `ids`); wait up to `wait_s` until they are no longer active."""
        if (host is None) == (ids is None):
            raise BadHookRequest("give exactly one of 'host' or 'ids'")
        before = self.control.executors()
        chosen = [e["id"] for e in before if (e["host"] == host if host is not None else e["id"] in (ids or []))]
        if not chosen:
            raise BadHookRequest(f"no active executor on {host}" if host is not None else f"no active executor {ids}")
        killed = self.control.kill(chosen)
        gone, current = self._wait(lambda ex: not any(e["id"] in killed for e in ex), wait_s)
        return {"target": self.control.target(), "removed": killed, "gone": gone, "executors": current}

    def warm(self, on_submit: Callable[[], None] | None = None) -> dict[str, Any]:
        """Run the warm-up job with one task per active executor; its figures (`ok`, `warm_s`, `tasks`).

        A failure is reported (`ok` false, `error`), not raised: the warm-up only saves time."""
        if self._warmer is None:
            raise BadHookRequest("this job has no warm-up")
        executors = self.control.executors()
        if on_submit is not None:
            on_submit()
        try:
            figures = self._warmer(len(executors))
        except Exception as err:  # noqa: BLE001 - a failed warm-up (an executor lost meanwhile) only costs speed
            return {"ok": False, "error": f"{type(err).__name__}: {str(err)[:300]}", "executors": executors}
        return {"ok": True, **figures, "executors": executors}

    def settle(self, target: int, wait_s: float = 60.0, quiet_s: float = 3.0) -> list[str]:
        """Bring a just-started application to exactly `target` executors; returns the ids it removed.

        A standalone master launches executors on every free worker as soon as the application registers,
        before the driver can lower the target; so set the target, wait until that many executors are up and
        no new one came for `quiet_s`, then kill the surplus (newest first) and set the target again.
        """
        self.control.set_target(target)
        deadline = self._clock() + wait_s
        seen = len(self.control.executors())
        calm_since = self._clock()
        while self._clock() < deadline:
            count = len(self.control.executors())
            if count != seen:
                seen, calm_since = count, self._clock()
            if count >= target and self._clock() - calm_since >= quiet_s:
                break
            self._sleep(self._poll_s)
        current = self.control.executors()
        surplus = [e["id"] for e in current[target:]]
        killed = self.control.kill(surplus) if surplus else []
        self.control.set_target(target)
        if killed:
            self._wait(lambda ex: not any(e["id"] in killed for e in ex), wait_s)
        return killed


def _started_a_task(executors: list[dict[str, Any]]) -> bool | None:
    """Whether every one of `executors` has started a task; None when the listing does not count tasks."""
    if any("tasks" not in e for e in executors):
        return None
    return all(e["tasks"] > 0 for e in executors)


def _registered(executor: dict[str, Any]) -> bool:
    """Whether the executor's block manager has registered (a port in the listing); before that Spark cannot
    offer its core. A listing without ports counts as registered."""
    return executor.get("port", 1) != 0
