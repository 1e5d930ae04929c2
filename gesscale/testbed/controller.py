"""Run the MAPE loop live against the local backend: periods until told to stop, outputs fed each period.

Shared by `gesscale run --backend local` and `gesscale demo`. Each applied reconfiguration is appended to
`reconfigurations.jsonl` beside the controller state, so a controller restarted after a crash (and the report)
sees every change exactly once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.mape import ControlLoop, StepRecord
from gesscale.model import PerformanceModel
from gesscale.policies.base import Policy, make_policy
from gesscale.state_file import state_for
from gesscale.testbed.backend import LocalBackend

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$")


def parse_duration(text: str, what: str = "duration") -> float:
    """`10s`, `1.5m`, `2h`, `500ms` or a bare number of seconds, in seconds; UserError otherwise."""
    m = _DURATION.match(str(text))
    if not m:
        raise UserError(f"{what} {text!r} is not a duration like 10s, 2m or 1h")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if value <= 0:
        raise UserError(f"{what} must be positive")
    return value


def read_reconfigurations(path: Path) -> list[dict[str, Any]]:
    """The reconfigurations recorded so far (a partly written last line is ignored)."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def start_from_model(policy: Policy, model: PerformanceModel) -> None:
    """Give a model-based policy `model` (a copy) as its starting model; UserError for a policy without one.

    Called before the loop resumes, so a model saved in a resumed controller state replaces this one.
    """
    if not hasattr(policy, "model"):
        raise UserError(f"policy {policy.id!r} has no performance model; --model is for model-based policies "
                        "(gesscale, mdl-nlunaware, ...)")
    policy.model = PerformanceModel.from_dict(model.to_dict())  # type: ignore[attr-defined]


def _state_has_model(path: Path, policy_id: str) -> bool:
    """True when the controller state at `path` holds a fitted model the loop will resume for `policy_id`."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    model = (state.get("policy_state") or {}).get("model") if state.get("policy") == policy_id else None
    return isinstance(model, dict) and (model.get("alpha") is not None or bool(model.get("measurements")))


class LiveController:
    """A ControlLoop on a LocalBackend with persistence, a reconfiguration log and per-period listeners.

    `initial_model` (e.g. from `gesscale calibrate --backend local`) is the policy's starting model, unless the
    controller resumes from a state that holds a fitted model: the resumed model (which already contains what
    the file gave plus what was learnt since) wins. `model_from` says which one the policy started from
    ("state", "file", or "" for neither).
    """

    def __init__(self, backend: LocalBackend, policy_id: str, latency_map: LatencyMap, config: ControllerConfig,
                 state_path: Path, listeners: list[Callable[[StepRecord, dict[str, Any] | None], None]],
                 initial_model: PerformanceModel | None = None, policy_options: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.policy = make_policy(policy_id, **(policy_options or {}))
        if initial_model is not None:
            start_from_model(self.policy, initial_model)
        self.state_path = Path(state_path)
        self.reconfig_path = self.state_path.with_name("reconfigurations.jsonl")
        self.listeners = listeners
        state, self.resume_note = state_for(self.state_path, self.policy.id)  # another policy's is kept beside
        self.resumed = state is not None
        resumed_model = self.resumed and _state_has_model(self.state_path, self.policy.id)
        self.model_from = "state" if resumed_model else ("file" if initial_model is not None else "")
        network = None
        if latency_map.change_times:  # the policy sees the map in force, as the emulation applies it
            def network(now_s: float) -> LatencyMap:
                return latency_map.at(max(0.0, now_s + backend.fleet.state.t0 - backend.started_s))
        self.loop = ControlLoop(backend, self.policy, latency_map, config, state_path=self.state_path,
                                on_step=self._on_step, network=network)
        if self.model_from == "file" and self.resumed:
            # The resumed state held no fitted model (a run that never measured): the file's model stands.
            start_from_model(self.policy, initial_model)  # type: ignore[arg-type]

    def _on_step(self, record: StepRecord) -> None:
        if record.applied and record.reconfiguration is not None:
            # On the testbed a change takes tens of seconds (a worker JVM starts, an executor registers): the
            # warm-up runs from when it was effective, not from the observation that asked for it.
            self.loop.last_reconfig_s = self.backend.now_s()
            rec = record.reconfiguration
            measured = self.backend.reconfigurations[-1].to_dict() if self.backend.reconfigurations else {}
            timing = {k: measured[k] for k in ("started_s", "took_s", "effective_s") if k in measured}
            line = {**rec.to_dict(), "strategy": self.backend.strategy, **timing}
            with self.reconfig_path.open("a") as fh:
                fh.write(json.dumps(line) + "\n")
        model = self.policy.model_summary()
        for listener in self.listeners:
            listener(record, model)

    def run(self, until: Callable[[], bool]) -> list[StepRecord]:
        """Step until `until()` is true or the backend is stopped."""
        while not self.backend.finished and not until():
            self.loop.step()
        return self.loop.history
