"""The scaling hook's operations, on top of an `ExecutorControl` (no HTTP here; see `jobs.http_api`).

`add` raises the target by one and waits for the new executor, so a backend that has made a chosen node the
only place with a free slot (a worker started there, or a Kubernetes node label) gets its executor there and
learns where it landed. `remove` kills the executors of a host (or given ids) and waits until they are gone.
`warm` runs the warm-up job of `jobs.warm`, so that a just-added executor pays its cold start before the
stream's micro-batches reach it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from jobs.executors import ExecutorControl


class HookError(ValueError):
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
            raise HookError("target must be >= 0")
        self.control.set_target(target)
        reached, current = self._wait(lambda ex: len(ex) == target, wait_s)
        return {"target": target, "reached": reached, "executors": current}

    def add(self, host: str | None = None, wait_s: float = 60.0) -> dict[str, Any]:
        """Target + 1; wait up to `wait_s` for a new executor (on `host`, when given)."""
        before = self.control.executors()
        known = {e["id"] for e in before}
        current_target = self.control.target()
        base = len(before) if current_target is None else max(current_target, len(before))
        self.control.set_target(base + 1)

        def arrived(ex: list[dict[str, Any]]) -> bool:
            return any(e["id"] not in known and (host is None or e["host"] == host) for e in ex)

        ok, current = self._wait(arrived, wait_s)
        new = [e for e in current if e["id"] not in known]
        return {"target": base + 1, "added": new, "on_requested_host": ok, "executors": current}

    def remove(self, host: str | None = None, ids: list[str] | None = None, wait_s: float = 30.0) -> dict[str, Any]:
        """Kill the executors on `host` (or with `ids`); wait up to `wait_s` until they are no longer active."""
        if (host is None) == (ids is None):
            raise HookError("give exactly one of 'host' or 'ids'")
        before = self.control.executors()
        chosen = [e["id"] for e in before if (e["host"] == host if host is not None else e["id"] in (ids or []))]
        if not chosen:
            raise HookError(f"no active executor on {host}" if host is not None else f"no active executor {ids}")
        killed = self.control.kill(chosen)
        gone, current = self._wait(lambda ex: not any(e["id"] in killed for e in ex), wait_s)
        return {"target": self.control.target(), "removed": killed, "gone": gone, "executors": current}

    def warm(self) -> dict[str, Any]:
        """Run the warm-up job with one task per active executor; its figures (`ok`, `warm_s`, `tasks`).

        A failure is reported (`ok` false, `error`), not raised: the warm-up only saves time."""
        if self._warmer is None:
            raise HookError("this job has no warm-up")
        executors = self.control.executors()
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
