"""Client of the Spark driver's HTTP API (jobs/http_api.py, docs/job.md): observation and scaling hook.

It lives beside the server it talks to, so both live backends (local testbed, Kubernetes) import it from the job
package and neither environment imports the other. `HookError` is this client's error (the API refused or did not
answer); the server's own refusal of a malformed request is `jobs.hook.BadHookRequest`.

Routes used: `GET /observation` (latest micro-batch observation, 404 before the first batch), `GET /executors`,
`POST /executors/target {"target": N, "wait_s": s}`, `POST /executors/remove {"ids": [...], "wait_s": s}`;
hook routes need `Authorization: Bearer <token>`. Setting the target is idempotent and retried on transport
errors and on 503 (Spark still starting); removing executors is sent once (the caller checks the pods to learn
what happened).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from gesscale.errors import UserError


class HookError(UserError):
    """The driver's API refused or failed a request; `status` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


class DriverHook(Protocol):
    """What a live backend (local testbed, Kubernetes) needs from the running job."""

    def observation(self) -> dict[str, Any] | None:
        """The latest observation, or None before the first micro-batch."""
        ...

    def executors(self) -> dict[str, Any]:
        """`{"target": int | None, "executors": [{"id", "host", "port"}]}`."""
        ...

    def set_target(self, target: int, wait_s: float = 0.0) -> dict[str, Any]:
        """Ask Spark for `target` executors in total."""
        ...

    def remove(self, ids: list[str], wait_s: float = 30.0) -> dict[str, Any]:
        """Kill the given executors (Spark lowers its target by as many)."""
        ...


class HttpDriverHook:
    """`DriverHook` over HTTP with a bearer token, timeouts and retries of idempotent calls."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_s: float = 10.0,
        attempts: int = 3,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise UserError(f"hook URL {base_url!r} must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self._sleep = sleep

    def _request(self, method: str, path: str, body: dict[str, Any] | None, *, idempotent: bool,
                 extra_timeout_s: float = 0.0) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = self.base_url + path
        for attempt in range(1, self.attempts + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s + extra_timeout_s) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as err:
                try:
                    payload = json.loads(err.read() or b"null")
                except ValueError:
                    payload = None
                if err.code == 503 and idempotent and attempt < self.attempts:  # Spark still starting
                    self._sleep(self.backoff_s * attempt)
                    continue
                return err.code, payload
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                if not idempotent or attempt == self.attempts:
                    reason = getattr(err, "reason", err)
                    raise HookError(f"driver API {method} {url}: no answer ({reason})", None) from None
                self._sleep(self.backoff_s * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _check(method: str, path: str, status: int, payload: Any) -> Any:
        if 200 <= status < 300:
            return payload
        message = payload.get("error") if isinstance(payload, dict) else None
        raise HookError(f"driver API {method} {path}: HTTP {status}: {message or 'no detail'}", status)

    def observation(self) -> dict[str, Any] | None:
        """`GET /observation` (None while the job has completed no micro-batch)."""
        status, payload = self._request("GET", "/observation", None, idempotent=True)
        if status == 404:
            return None
        return self._check("GET", "/observation", status, payload)

    def executors(self) -> dict[str, Any]:
        """`GET /executors`."""
        status, payload = self._request("GET", "/executors", None, idempotent=True)
        return self._check("GET", "/executors", status, payload)

    def set_target(self, target: int, wait_s: float = 0.0) -> dict[str, Any]:
        """`POST /executors/target` (idempotent: retried on transport errors)."""
        status, payload = self._request("POST", "/executors/target", {"target": target, "wait_s": wait_s},
                                        idempotent=True, extra_timeout_s=wait_s)
        return self._check("POST", "/executors/target", status, payload)

    def add(self, host: str | None = None, wait_s: float = 60.0, warm: bool = False,
            warm_timeout_s: float = 120.0) -> dict[str, Any]:
        """`POST /executors/add` (sent once): target + 1, wait for the new executor (on `host`); with `warm`, the
        driver runs its warm-up job on it before the stream's micro-batches may use it."""
        body = {"host": host, "wait_s": wait_s, "warm": warm}
        status, payload = self._request("POST", "/executors/add", body, idempotent=False,
                                        extra_timeout_s=wait_s + (warm_timeout_s if warm else 0.0))
        return self._check("POST", "/executors/add", status, payload)

    def warm(self, timeout_s: float = 120.0) -> dict[str, Any]:
        """`POST /executors/warm`: the driver's warm-up job on every executor (sent once; `ok` false if it
        failed). Answers when the job is done, which takes a new executor's cold start."""
        status, payload = self._request("POST", "/executors/warm", {}, idempotent=False, extra_timeout_s=timeout_s)
        return self._check("POST", "/executors/warm", status, payload)

    def remove(self, ids: list[str], wait_s: float = 30.0) -> dict[str, Any]:
        """`POST /executors/remove` by executor ids (sent once)."""
        status, payload = self._request("POST", "/executors/remove", {"ids": list(ids), "wait_s": wait_s},
                                        idempotent=False, extra_timeout_s=wait_s)
        return self._check("POST", "/executors/remove", status, payload)
