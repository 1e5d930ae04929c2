"""The live runner: the MAPE loop run period after period against a live backend, for every environment.

`gesscale run --backend local`, `gesscale demo` and `gesscale k8s run` all run the controller through
`LiveRunner`. It wraps the core's `ControlLoop` with what a long-running controller needs:
- state persistence: the policy's learned state is saved every period (`ControlLoop`) and a restarted runner
  resumes from it; a starting model (`gesscale calibrate`) is used unless the resumed state holds a fitted one;
- the reconfiguration log: each applied reconfiguration is appended to `reconfigurations.jsonl` beside the state
  file, so a controller restarted after a crash (and the report) sees every change exactly once;
- listeners fed each period (the Prometheus exporter `gesscale.exporter`, a terminal view, a console line);
- a failed reconfiguration (`ReconfigurationFailed`, undone by the backend) or a period without observation
  (`ObservationUnavailable`) is reported and the next period plans again;
- a stop condition, a number of periods, or Ctrl-C.

What differs between environments comes in as options, never as an import: `network` (the latency map in force
at a time the backend reports), `effective_at` (when a reconfiguration took effect: the warm-up runs from then)
and `log_fields` (what the environment adds to a reconfiguration's log line).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gesscale.backend import Backend, ObservationUnavailable, ReconfigurationFailed
from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.mape import ControlLoop, StepRecord
from gesscale.measured_latency import LatencyChange
from gesscale.model import PerformanceModel
from gesscale.observation import Reconfiguration
from gesscale.policies.base import Policy, make_policy
from gesscale.state_file import state_for

log = logging.getLogger(__name__)

Listener = Callable[[StepRecord, "dict[str, Any] | None"], None]
"""Called after each period with its record and the policy's model summary (None for a policy without model)."""


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


def error_reporter(say: Callable[[str], None]) -> Callable[[Exception], None]:
    """An `on_error` hook printing one line (rich markup) through `say`: what failed, and that the run goes on."""

    def report(err: Exception) -> None:
        if isinstance(err, ReconfigurationFailed):
            say(f"[red]reconfiguration failed:[/red] {err}")
        else:
            say(f"[yellow]{err}[/yellow]")

    return report


@dataclass
class RunnerHooks:
    """What an environment adds to the runner, as functions (the runner imports no environment).

    `network(t)`: the latency map in force at time `t` of the backend's clock (None: the map given stays in
    force). `effective_at()`: the backend's time once a reconfiguration has taken effect; the warm-up then runs
    from that moment rather than from the observation that asked for it (None: from the observation).
    `log_fields(rec)`: keys added to the reconfiguration's line in `reconfigurations.jsonl` (e.g. the strategy
    and the measured timing). `on_error(err)`: told of a failed reconfiguration or a missing observation
    before the runner goes on to the next period (None: logged as a warning). `network_log(t)`: the changes
    the controller's measured view of the network logged at `t`, kept in the period's record (`ControlLoop`).
    `network_unconfirmed(threshold_ms)`: the pairs of nodes whose links the measured view saw rise in its last
    round but has not taken yet (`ControlLoop`: a scale-up beside them is held for a period).
    """

    network: Callable[[float], LatencyMap] | None = None
    effective_at: Callable[[], float] | None = None
    log_fields: Callable[[Reconfiguration], dict[str, Any]] | None = None
    on_error: Callable[[Exception], None] | None = None
    network_log: Callable[[float], tuple[LatencyChange, ...]] | None = None
    network_unconfirmed: Callable[[float], tuple[tuple[str, str], ...]] | None = None


class LiveRunner:
    """A `ControlLoop` on a live backend with persistence, a reconfiguration log, listeners and error handling.

    `policy` is a policy id or a policy. `initial_model` (e.g. from `gesscale calibrate`) is the policy's
    starting model, unless the runner resumes from a state that holds a fitted model: the resumed model (which
    already contains what the file gave plus what was learnt since) wins. `model_from` says which one the policy
    started from ("state", "file", or "" for neither). Without `state_path` nothing is saved or logged. Each of
    `listeners` is called after every period that ended with a record.
    """

    def __init__(self, backend: Backend, policy: str | Policy, latency_map: LatencyMap, config: ControllerConfig,
                 state_path: Path | None, listeners: list[Listener] | None = None, hooks: RunnerHooks | None = None,
                 initial_model: PerformanceModel | None = None) -> None:
        self.backend = backend
        self.hooks = hooks or RunnerHooks()
        self.listeners = listeners if listeners is not None else []
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        if initial_model is not None:
            if initial_model.latency != config.model_latency:
                raise UserError(f"the model file's points are in latency {initial_model.latency!r}, the controller's "
                                f"model_latency is {config.model_latency!r}: give --model-latency "
                                f"{initial_model.latency}, or calibrate with {config.model_latency}")
            start_from_model(self.policy, initial_model)
        self.state_path = Path(state_path) if state_path is not None else None
        self.reconfig_path = self.state_path.with_name("reconfigurations.jsonl") if self.state_path else None
        self.resumed = False
        self.resume_note = ""
        resumed_model = False
        if self.state_path is not None:
            state, self.resume_note = state_for(self.state_path, self.policy.id)  # another policy's is kept beside
            self.resumed = state is not None
            resumed_model = self.resumed and _state_has_model(self.state_path, self.policy.id)
        self.model_from = "state" if resumed_model else ("file" if initial_model is not None else "")
        self.loop = ControlLoop(backend, self.policy, latency_map, config, state_path=self.state_path,
                                on_step=self._on_step, network=self.hooks.network,
                                network_log=self.hooks.network_log,
                                network_unconfirmed=self.hooks.network_unconfirmed)
        if self.model_from == "file" and self.resumed:
            # The resumed state held no fitted model (a run that never measured): the file's model stands.
            start_from_model(self.policy, initial_model)  # type: ignore[arg-type]
        self.periods = 0  # periods stepped, failed ones included
        self.errors: list[Exception] = []
        self.interrupted = False

    @property
    def history(self) -> list[StepRecord]:
        """Every period that ended with a record (a failed one has none)."""
        return self.loop.history

    def _on_step(self, record: StepRecord) -> None:
        rec = record.reconfiguration
        if record.applied and rec is not None:
            if self.hooks.effective_at is not None:
                self.loop.last_reconfig_s = self.hooks.effective_at()
            if self.reconfig_path is not None:
                extra = self.hooks.log_fields(rec) if self.hooks.log_fields is not None else {}
                with self.reconfig_path.open("a") as fh:
                    fh.write(json.dumps({**rec.to_dict(), **extra}) + "\n")
        model = self.policy.model_summary()
        for listener in self.listeners:
            listener(record, model)

    def step(self) -> StepRecord | None:
        """Run one period; None when it failed (`ReconfigurationFailed`, `ObservationUnavailable`), reported."""
        try:
            record = self.loop.step()
        except (ReconfigurationFailed, ObservationUnavailable) as err:  # undone by the backend; plan again
            self.periods += 1
            self.errors.append(err)
            if self.hooks.on_error is not None:
                self.hooks.on_error(err)
            else:
                log.warning("%s: %s", type(err).__name__, err)
            return None
        self.periods += 1
        return record

    def run(self, until: Callable[[], bool] | None = None, max_steps: int | None = None,
            catch_interrupt: bool = False) -> list[StepRecord]:
        """Step until `until()` is true, `max_steps` periods have run or the backend has finished.

        With `catch_interrupt`, Ctrl-C (KeyboardInterrupt) ends the run quietly and sets `interrupted`;
        otherwise it propagates to the caller, who tears down what it started.
        """
        steps = 0
        try:
            while not self.backend.finished and (until is None or not until()) \
                    and (max_steps is None or steps < max_steps):
                self.step()
                steps += 1
        except KeyboardInterrupt:
            if not catch_interrupt:
                raise
            self.interrupted = True
        return self.loop.history
