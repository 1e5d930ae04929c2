"""When a failed Kubernetes API call may be repeated (pure: no I/O).

Repeating is safe only for calls whose effect does not depend on how often they land: reads, and the merge
patches the controller sends (label set/unset, executor-count annotation, replicas), which carry no
resourceVersion and leave the same state however many times they are applied. Creating an Event is not
repeated (a duplicate is harmless but noisy, and events are best effort anyway).

- no HTTP status (timeout, connection refused or reset): retry when idempotent;
- 409 Conflict (a concurrent writer won the race): retry when idempotent, the patch is re-sent as is;
- 429 Too Many Requests, 500, 502, 503, 504: retry when idempotent;
- anything else (400, 401, 403 Forbidden, 404 Not Found, 422 Invalid): never — retrying cannot help.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSIENT_STATUSES = frozenset({409, 429, 500, 502, 503, 504})


def should_retry(status: int | None, idempotent: bool) -> bool:
    """Whether a call that failed with `status` (None: no response at all) is worth sending again."""
    if not idempotent:
        return False
    return status is None or status in TRANSIENT_STATUSES


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts and how long to wait between them (doubling, capped)."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the failed attempt number `attempt` (1-based)."""
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
