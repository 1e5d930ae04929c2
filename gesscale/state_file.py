"""The controller's state file: read and checked before anything starts, never silently discarded.

A state file holds what a controller learnt (the policy's model, the time of its last reconfiguration, a change
it was making). It is checked in full when read: a file that is not JSON, not a state, or holds impossible
values (a NaN time) is a `UserError` naming the file and the problem, so a user finds out before a testbed is
brought up, and can fix it or start afresh deliberately (`--reset-state`, which keeps the old file beside).

A state written under another policy is never overwritten: it is moved beside as `<stem>.<policy>.json`, and if
a state of the current policy was kept beside earlier, that one is resumed (switching back and forth between two
policies keeps both models).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from gesscale.errors import UserError, brief

_KEYS = {"policy", "policy_state", "last_reconfig_s", "pending", "rng"}


def _fail(path: Path, problem: str) -> UserError:
    return UserError(f"{path}: {problem}; fix or remove it, or start afresh with --reset-state (the old file is "
                     "kept beside)")


def _time(path: Path, value: Any, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or abs(value) > 1e18 or not math.isfinite(value):
        raise _fail(path, f"{what} must be a finite number of seconds, got {brief(value)}")


def read_state(path: Path) -> dict[str, Any] | None:
    """The state at `path` (None when there is none), checked; UserError for anything a loop cannot resume."""
    from gesscale.inputfile import read_bytes

    if not os.path.lexists(path):
        return None
    try:
        text = read_bytes(path, "controller state").decode("utf-8", errors="replace")
    except UserError as err:
        raise _fail(path, f"cannot be read ({str(err).replace(f'controller state {path} ', '')})") from None
    try:
        state = json.loads(text)
    except ValueError as err:
        raise _fail(path, f"is not JSON ({err.msg} at line {err.lineno}): a truncated or damaged state") from None
    if not isinstance(state, dict) or not isinstance(state.get("policy"), str):
        raise _fail(path, "is not a controller state (no policy named)")
    unknown = sorted(set(state) - _KEYS)
    if unknown:
        raise _fail(path, f"is not a controller state (unknown keys {', '.join(unknown)})")
    if not isinstance(state.get("policy_state") or {}, dict):
        raise _fail(path, "policy_state must be a mapping")
    _time(path, state.get("last_reconfig_s"), "last_reconfig_s")
    pending = state.get("pending")
    if pending is not None:
        if not isinstance(pending, dict) or not isinstance(pending.get("nodes"), list):
            raise _fail(path, "pending must be a mapping with the nodes of the change")
        _time(path, pending.get("time_s"), "pending.time_s")
    return state


def beside(path: Path, policy: str) -> Path:
    """Where the state of `policy` is kept when another policy uses `path`."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in policy)
    return path.with_name(f"{path.stem}.{safe}{path.suffix}")


def state_for(path: Path, policy: str) -> tuple[dict[str, Any] | None, str]:
    """The state `policy` resumes from at `path`, after setting aside a state of another policy; and a note of what
    was done ('' when nothing). Nothing is deleted."""
    state = read_state(path)
    if state is None or state["policy"] == policy:
        return state, ""
    other = state["policy"]
    kept = beside(path, other)
    if kept.exists():
        kept = kept.with_name(f"{kept.stem}.{int(time.time())}{kept.suffix}")
    os.replace(path, kept)
    note = f"the state of policy {other} was kept as {kept}"
    own = beside(path, policy)
    own_state = read_state(own)
    if own_state is not None and own_state["policy"] == policy:
        os.replace(own, path)
        return own_state, note + f"; resuming {policy} from its own earlier state"
    return None, note


def reset_state(path: Path) -> Path | None:
    """Move the state at `path` aside (`<stem>.reset-<time>.json`) so the next run starts afresh; where it went."""
    if not path.exists():
        return None
    kept = path.with_name(f"{path.stem}.reset-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
    os.replace(path, kept)
    return kept
