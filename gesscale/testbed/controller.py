"""The live runner on the local testbed: `gesscale.runner.LiveRunner` with what the testbed adds.

Shared by `gesscale run --backend local` and `gesscale demo`. The testbed adds three things to the generic
runner: the warm-up runs from when a change took effect (a worker JVM starts, an executor registers: tens of
seconds after the observation that asked for it), the policy sees the latency map the WAN emulation applies at
each moment, and each line of `reconfigurations.jsonl` carries the strategy and the change's measured timing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.mape import StepRecord
from gesscale.model import PerformanceModel
from gesscale.observation import Reconfiguration
from gesscale.options import parse_duration_text
from gesscale.policies.base import make_policy
from gesscale.runner import LiveRunner, RunnerHooks, read_reconfigurations, start_from_model
from gesscale.testbed.backend import LocalBackend

__all__ = ["LiveController", "parse_duration", "read_reconfigurations", "start_from_model"]

def parse_duration(text: str, what: str = "duration") -> float:
    """A positive duration (`10s`, `1.5m`, `2h`, `500ms` or a bare number of seconds) in seconds, as the options'
    parser reads it (gesscale.options); UserError otherwise."""
    value = parse_duration_text(text, what)
    if value <= 0:
        raise UserError(f"{what} must be positive")
    return value


def testbed_hooks(backend: LocalBackend, latency_map: LatencyMap) -> RunnerHooks:
    """The testbed's additions to the live runner (see the module docstring)."""
    network = None
    if latency_map.change_times:  # the policy sees the map in force, as the emulation applies it
        def network(now_s: float) -> LatencyMap:
            return latency_map.at(max(0.0, now_s + backend.fleet.state.t0 - backend.started_s))

    def log_fields(rec: Reconfiguration) -> dict[str, Any]:
        measured = backend.reconfigurations[-1] if backend.reconfigurations else None
        return rec.with_measurement(measured, strategy=backend.strategy).to_dict()

    return RunnerHooks(network=network, effective_at=backend.now_s, log_fields=log_fields)


class LiveController(LiveRunner):
    """A live runner on a LocalBackend with the testbed's hooks (`testbed_hooks`).

    `initial_model` (e.g. from `gesscale calibrate --backend local`) is the policy's starting model, unless the
    controller resumes from a state that holds a fitted model (`LiveRunner`).
    """

    def __init__(self, backend: LocalBackend, policy_id: str, latency_map: LatencyMap, config: ControllerConfig,
                 state_path: Path, listeners: list[Callable[[StepRecord, dict[str, Any] | None], None]],
                 initial_model: PerformanceModel | None = None, policy_options: dict[str, Any] | None = None) -> None:
        policy = make_policy(policy_id, **(policy_options or {}))
        super().__init__(backend, policy, latency_map, config, Path(state_path), listeners,
                         testbed_hooks(backend, latency_map), initial_model)
        self.backend: LocalBackend = backend
