"""The driver's small HTTP server: open read-only metrics, and the token-protected scaling hook.

Routes (see docs/job.md for bodies):
  GET  /metrics             Prometheus text of the latest observation (no auth)
  GET  /observation         the latest observation as JSON (no auth; 404 before the first batch)
  GET  /executors           executors and target                   (auth)
  POST /executors/target    {"target": N, "wait_s": 0}               (auth)
  POST /executors/add       {"host": "H" (optional), "wait_s": 60, "warm": false}  (auth)
  POST /executors/remove    {"host": "H"} or {"ids": [...]}, "wait_s": 30 (auth)
  POST /executors/warm      {} : run the warm-up job (jobs/warm.py) on every executor (auth)
Auth: header `Authorization: Bearer <token>` (nothing else), token from the environment variable
`GESSCALE_JOB_TOKEN`; without it the hook routes answer 403.

The server is built not to be held by a client: the token is checked before the body is read, a POST needs a
Content-Length (411 without it) of at most `MAX_BODY` bytes (413 above, refused before reading), a request must
arrive within one deadline (not a timeout per read), one client address holds at most `per_client` workers
(429 beyond), and requests run on a bounded pool of threads (jobs/http_server.py), not one thread per
connection. A body's numbers must be finite and in range (`NUMBERS`): NaN, Infinity, 1e308 are answered 400.
"""

from __future__ import annotations

import hmac
import io
import json
import math
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from gesscale.errors import UserError
from jobs.executors import ScalingUnsupported
from jobs.hook import BadHookRequest, ScalingHook
from jobs.http_server import DeadlineReader, PooledHTTPServer

TOKEN_ENV = "GESSCALE_JOB_TOKEN"
MAX_BODY = 64 * 1024  # the hook's bodies are a few dozen bytes
BEARER = "Bearer "
MAX_TARGET = 4096  # executors: far above any cluster this job runs on (a Pi cluster has tens)
MAX_WAIT_S = 3600.0  # the longest a hook call may wait for its change to show
# Each number a body may carry: (lowest, highest, whole number); anything else is answered 400.
NUMBERS: dict[str, tuple[float, float, bool]] = {"target": (0, MAX_TARGET, True), "wait_s": (0.0, MAX_WAIT_S, False)}


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number the hook accepts")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range")
    return value


def parse_body(body: bytes) -> dict[str, Any]:
    """The body as a JSON object whose numbers are finite and within `NUMBERS` (`BadHookRequest` otherwise)."""
    try:
        args = json.loads(body or b"{}", parse_constant=_refuse_constant, parse_float=_finite)
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, 1e400, a 5000-digit integer, bad UTF-8
        raise BadHookRequest(f"the body is not JSON the hook accepts: {str(err)[:120]}") from None
    if not isinstance(args, dict):
        raise BadHookRequest("the body must be a JSON object")
    for key, (lo, hi, whole) in NUMBERS.items():
        if key not in args:
            continue
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadHookRequest(f"{key} must be a number, got {str(value)[:40]!r}")
        if whole and value != int(value):
            raise BadHookRequest(f"{key} must be a whole number, got {value}")
        if not lo <= value <= hi:
            raise BadHookRequest(f"{key} must be in [{lo:g}, {hi:g}], got {str(value)[:40]}")
    return args


# RFC 6750's b64token: what a client can put after "Bearer " in a header (latin-1 text, no space); any other
# token could never be sent, so the hook would answer 401 to every request.
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def check_token(token: str | None) -> str | None:
    """`token` if a client can send it as a bearer token; a `UserError` naming the variable (not the secret)."""
    if token is not None and not _TOKEN.fullmatch(token):
        raise UserError(f"{TOKEN_ENV} must be a bearer token: letters, digits and -._~+/ then '=' padding (RFC 6750); "
                        f"the one set ({len(token)} characters) holds others")
    return token


class DriverApi:
    """Routes a request to the observation, the metrics or the hook and returns (status, content type, body)."""

    def __init__(self, latest: Callable[[], dict[str, Any] | None], metrics: Callable[[], bytes],
                 hook: ScalingHook | None, token: str | None) -> None:
        self.latest = latest
        self.metrics = metrics
        self.hook = hook
        self.token = check_token(token or None)

    def _authorised(self, header: str | None) -> tuple[int, str] | None:
        if self.hook is None:
            return 503, "the job is still starting Spark"
        if self.token is None:
            return 403, f"scaling hook disabled: set {TOKEN_ENV} in the job's environment"
        header = header or ""
        given = header[len(BEARER):].strip() if header.startswith(BEARER) else ""
        # compared in constant time whatever was given (an empty token never matches: self.token is not empty)
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return 401, "missing or wrong bearer token (header 'Authorization: Bearer <token>')"
        return None

    def refuse_early(
        self, method: str, path: str, auth: str | None, length: str | None
    ) -> tuple[int, str, bytes] | None:
        """The answer to a request that must be refused before its body is read (unknown route, no or wrong
        token, missing or too large Content-Length); None when the body may be read."""
        if path in ("/metrics", "/observation") and method == "GET":
            return None
        if not path.startswith("/executors"):
            return _json(404, {"error": f"no route {method} {path}"})
        denied = self._authorised(auth)
        if denied is not None:
            return _json(denied[0], {"error": denied[1]})
        if method == "POST" and length is None:
            return _json(411, {"error": "a POST needs a Content-Length header"})
        try:
            size = int(length or 0)
        except ValueError:
            return _json(400, {"error": f"bad Content-Length {length!r}"})
        if size < 0:
            return _json(400, {"error": f"bad Content-Length {length!r}"})
        if size > MAX_BODY:
            return _json(413, {"error": f"body of {size} bytes refused: at most {MAX_BODY}"})
        return None

    def handle(self, method: str, path: str, auth: str | None, body: bytes) -> tuple[int, str, bytes]:
        """Serve one request."""
        if method == "GET" and path == "/metrics":
            return 200, "text/plain; version=0.0.4", self.metrics()
        if method == "GET" and path == "/observation":
            obs = self.latest()
            return _json(200, obs) if obs is not None else _json(404, {"error": "no micro-batch completed yet"})
        if not path.startswith("/executors"):
            return _json(404, {"error": f"no route {method} {path}"})
        denied = self._authorised(auth)
        if denied is not None:
            return _json(denied[0], {"error": denied[1]})
        assert self.hook is not None
        try:
            args = parse_body(body)
            if method == "GET" and path == "/executors":
                return _json(200, self.hook.status())
            if method == "POST" and path == "/executors/target":
                return _json(200, self.hook.set_target(int(args["target"]), float(args.get("wait_s", 0))))
            if method == "POST" and path == "/executors/add":
                return _json(200, self.hook.add(args.get("host"), float(args.get("wait_s", 60)),
                                                bool(args.get("warm", False))))
            if method == "POST" and path == "/executors/warm":
                return _json(200, self.hook.warm())
            if method == "POST" and path == "/executors/remove":
                return _json(200, self.hook.remove(args.get("host"), args.get("ids"), float(args.get("wait_s", 30))))
        except (BadHookRequest, KeyError, ValueError, TypeError) as err:
            return _json(400, {"error": f"bad request: {err}"})
        except ScalingUnsupported as err:
            return _json(409, {"error": str(err)})
        return _json(404, {"error": f"no route {method} {path}"})


def _json(status: int, payload: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(payload).encode()


def serve(
    api: DriverApi, host: str, port: int, *, workers: int = 8, timeout_s: float = 10.0, per_client: int | None = None
) -> PooledHTTPServer:
    """Start serving `api` on host:port in a daemon thread; `server.shutdown()` then `server.server_close()`
    stop it. At most `workers` requests are served at once, at most `per_client` (default: half the workers)
    for one client address; a connection silent for `timeout_s` is closed, and a request must have arrived
    `timeout_s` after a worker took it.

    Raises ValueError for a port outside 1-65535, OSError when the port is taken.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not in 1-65535")

    class Handler(BaseHTTPRequestHandler):
        timeout = timeout_s  # socket timeout while writing the answer (reading runs against the deadline)

        def setup(self) -> None:
            super().setup()
            deadline = self.server.request_deadline()  # type: ignore[attr-defined]
            self.rfile = io.BufferedReader(DeadlineReader(self.connection, deadline))

        def _serve(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            auth, length = self.headers.get("Authorization"), self.headers.get("Content-Length")
            early = api.refuse_early(method, path, auth, length)
            if early is not None:
                self.close_connection = True  # the body (if any) was not read: do not parse it as a request
                status, ctype, payload = early
            else:
                size = int(length or 0)
                body = self.rfile.read(size) if size else b""
                status, ctype, payload = api.handle(method, path, auth, body)
            self.connection.settimeout(timeout_s)  # the answer is written with a plain timeout
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence per-request logs
            return

    server = PooledHTTPServer((host, port), Handler, workers=workers, idle_timeout_s=timeout_s,
                              request_timeout_s=timeout_s, per_client=per_client)  # fmt: skip
    threading.Thread(target=server.serve_forever, name="gesscale-driver-api", daemon=True).start()
    return server
