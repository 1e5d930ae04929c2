"""The live runner (`gesscale/runner.py`) against a fake backend: no Spark, no cluster, a scripted policy.

Steps and stop conditions, a failed reconfiguration then recovery, a period without observation, the state
written every period and resumed, and the lines of `reconfigurations.jsonl`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gesscale.backend import Backend, ObservationUnavailable, ReconfigurationFailed
from gesscale.config import ControllerConfig
from gesscale.mape import StepRecord
from gesscale.observation import Decision, NodeState, Observation, Placement, Reconfiguration
from gesscale.policies.base import Policy, PolicyContext
from gesscale.runner import LiveRunner, RunnerHooks, error_reporter, read_reconfigurations
from tests.helpers import LMAP

PERIOD = 10.0


class FakeBackend(Backend):
    """Six nodes, a clock advancing one period per `observe`, and failures to inject by period or by call."""

    def __init__(self, replicas: tuple[str, ...] = ("n1",), periods: int | None = None) -> None:
        self.replicas = replicas
        self.t = 0.0
        self.periods = periods  # finished after this many observations (None: never)
        self.observed = 0
        self.fail_apply: list[bool] = []  # one entry per apply call: True raises ReconfigurationFailed
        self.no_observation: set[int] = set()  # observation numbers (1-based) that raise ObservationUnavailable
        self.applied: list[Placement] = []
        self.interrupt_at: int | None = None  # observation number that raises KeyboardInterrupt

    def nodes(self) -> list[NodeState]:
        return [NodeState(n) for n in LMAP.names]

    def current(self) -> Placement:
        return Placement(self.replicas, LMAP.nd_max(self.replicas))

    def observe(self) -> Observation:
        self.observed += 1
        self.t += PERIOD
        if self.observed == self.interrupt_at:
            raise KeyboardInterrupt
        if self.observed in self.no_observation:
            raise ObservationUnavailable("no observation this period")
        return Observation(time_s=self.t, period_s=PERIOD, input_rate=100.0, throughput=100.0, backlog=0.0,
                           backlog_growth=0.0, bp_upstream=0.0, bp_operator=0.0, replicas=self.replicas,
                           nd_max_ms=LMAP.nd_max(self.replicas), cpu=0.5)

    def apply(self, placement: Placement, instant: bool = False) -> float:
        if self.fail_apply and self.fail_apply.pop(0):
            raise ReconfigurationFailed(f"could not reach {', '.join(placement.nodes)}; undone")
        self.applied.append(placement)
        self.replicas = placement.nodes
        return 2.5

    @property
    def finished(self) -> bool:
        return self.periods is not None and self.observed >= self.periods


class Scripted(Policy):
    """Asks for the given replica counts one period after another; its state is the script left and a count."""

    id: ClassVar[str] = "scripted-runner-test"

    def __init__(self, targets: list[int]) -> None:
        self.targets = list(targets)
        self.decided = 0

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        self.decided += 1
        return Decision(self.targets.pop(0) if self.targets else obs.n, "scripted")

    def state_dict(self) -> dict[str, Any]:
        return {"targets": self.targets, "decided": self.decided}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.targets = list(state.get("targets", self.targets))
        self.decided = int(state.get("decided", 0))

    def model_summary(self) -> dict[str, Any] | None:
        return {"measurements": self.decided}


def _config(**kw: Any) -> ControllerConfig:
    return ControllerConfig(**{"control_period_s": PERIOD, "warmup_s": 0.0, "min_replicas": 1,
                               "max_replicas": 6, **kw})


def test_runs_the_given_number_of_periods_and_feeds_every_listener(tmp_path: Path) -> None:
    seen: list[tuple[StepRecord, dict[str, Any] | None]] = []
    runner = LiveRunner(FakeBackend(), Scripted([1, 2, 2]), LMAP, _config(), tmp_path / "state.json",
                        [lambda r, m: seen.append((r, m))])
    history = runner.run(max_steps=3)
    assert len(history) == 3 and runner.periods == 3
    assert [r.observation.n for r in history] == [1, 1, 2]
    assert [r.applied for r in history] == [False, True, False]
    assert [m for _, m in seen] == [{"measurements": 1}, {"measurements": 2}, {"measurements": 3}]
    assert [r for r, _ in seen] == history


def test_stops_when_the_condition_holds_or_the_backend_has_finished(tmp_path: Path) -> None:
    runner = LiveRunner(FakeBackend(), Scripted([]), LMAP, _config(), None)
    runner.run(until=lambda: len(runner.history) >= 2)
    assert len(runner.history) == 2
    finite = LiveRunner(FakeBackend(periods=4), Scripted([]), LMAP, _config(), None)
    assert len(finite.run()) == 4  # no condition, no count: until the backend has nothing left to observe
    assert len(finite.run(max_steps=10)) == 4  # nothing more once finished


def test_a_failed_reconfiguration_is_reported_and_the_next_period_plans_again(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.fail_apply = [True]
    said: list[str] = []
    runner = LiveRunner(backend, Scripted([2, 2, 2]), LMAP, _config(), tmp_path / "state.json",
                        hooks=RunnerHooks(on_error=error_reporter(said.append)))
    assert runner.step() is None  # the period failed: no record, nothing applied, reported once
    assert said == ["[red]reconfiguration failed:[/red] could not reach n1, n2; undone"]
    assert isinstance(runner.errors[0], ReconfigurationFailed) and backend.applied == []
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["pending"]["nodes"] == ["n1", "n2"] and state["last_reconfig_s"] is None  # in flight, not done
    record = runner.step()  # recovery: the same change asked again, applied this time
    assert record is not None and record.applied and record.reconfiguration.nodes == ("n1", "n2")
    assert backend.applied == [Placement(("n1", "n2"), LMAP.nd_max(("n1", "n2")))]
    assert runner.periods == 2 and len(runner.history) == 1
    assert [r["nodes"] for r in read_reconfigurations(tmp_path / "reconfigurations.jsonl")] == [["n1", "n2"]]
    assert json.loads((tmp_path / "state.json").read_text())["pending"] is None


def test_a_period_without_observation_counts_and_the_run_goes_on(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.no_observation = {2}
    said: list[str] = []
    runner = LiveRunner(backend, Scripted([]), LMAP, _config(), None,
                        hooks=RunnerHooks(on_error=error_reporter(said.append)))
    runner.run(max_steps=3)
    assert runner.periods == 3 and len(runner.history) == 2
    assert said == ["[yellow]no observation this period[/yellow]"]
    assert isinstance(runner.errors[0], ObservationUnavailable)


def test_without_an_error_hook_a_failed_period_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    backend = FakeBackend()
    backend.no_observation = {1}
    runner = LiveRunner(backend, Scripted([]), LMAP, _config(), None)
    with caplog.at_level("WARNING", logger="gesscale.runner"):
        assert runner.step() is None
    assert "ObservationUnavailable: no observation this period" in caplog.text
    assert runner.step() is not None and runner.periods == 2


def test_other_errors_are_not_swallowed(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.apply = lambda placement, instant=False: 1 / 0  # type: ignore[method-assign]
    runner = LiveRunner(backend, Scripted([2]), LMAP, _config(), None)
    with pytest.raises(ZeroDivisionError):
        runner.run(max_steps=2)


def test_ctrl_c_ends_the_run_quietly_only_when_asked(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.interrupt_at = 3
    runner = LiveRunner(backend, Scripted([]), LMAP, _config(), None)
    assert len(runner.run(catch_interrupt=True)) == 2 and runner.interrupted
    backend.interrupt_at = 4
    with pytest.raises(KeyboardInterrupt):
        runner.run()


def test_the_state_is_written_every_period_and_a_new_runner_resumes_from_it(tmp_path: Path) -> None:
    state = tmp_path / "ctl" / "state.json"
    backend = FakeBackend()
    first = LiveRunner(backend, Scripted([2, 2, 3]), LMAP, _config(), state)
    assert not first.resumed and first.model_from == ""
    first.run(max_steps=2)  # period 1 scales up at t=10; period 2 keeps the two replicas
    saved = json.loads(state.read_text())
    assert saved["policy"] == "scripted-runner-test" and saved["last_reconfig_s"] == 10.0
    assert saved["policy_state"] == {"targets": [3], "decided": 2}
    # A controller started again on the same state carries on where the first stopped.
    again = LiveRunner(backend, Scripted([9, 9]), LMAP, _config(), state)
    assert again.resumed and again.resume_note == ""
    assert again.policy.state_dict() == {"targets": [3], "decided": 2}  # type: ignore[attr-defined]
    assert again.loop.last_reconfig_s == 10.0
    record = again.step()  # t=30: the first script's last target, not the new script's
    assert record is not None and record.applied and len(record.reconfiguration.nodes) == 3


def test_another_policys_state_is_kept_aside_and_the_runner_starts_afresh(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"policy": "someone-else", "policy_state": {}}))
    runner = LiveRunner(FakeBackend(), Scripted([]), LMAP, _config(), state)
    assert not runner.resumed and "someone-else" in runner.resume_note
    assert [json.loads(p.read_text())["policy"] for p in tmp_path.glob("state.*.json")] == ["someone-else"]
    runner.step()
    assert json.loads(state.read_text())["policy"] == "scripted-runner-test"


def test_each_applied_reconfiguration_is_one_line_with_the_environments_fields(tmp_path: Path) -> None:
    backend = FakeBackend()
    clock = iter([14.0, 33.0])

    def log_fields(rec: Reconfiguration) -> dict[str, Any]:
        return {"strategy": "live", "took_s": 4.0}

    runner = LiveRunner(backend, Scripted([2, 2, 1]), LMAP, _config(), tmp_path / "state.json",
                        hooks=RunnerHooks(effective_at=lambda: next(clock), log_fields=log_fields))
    runner.run(max_steps=3)
    lines = (tmp_path / "reconfigurations.jsonl").read_text().splitlines()
    assert len(lines) == 2
    up, down = (json.loads(line) for line in lines)
    assert set(up) == {"time_s", "kind", "added", "removed", "nodes", "nd_max_ms", "pause_s", "reason", "strategy",
                       "took_s"}
    assert (up["kind"], up["added"], up["nodes"], up["pause_s"], up["time_s"]) == ("up", ["n2"], ["n1", "n2"], 2.5,
                                                                                     10.0)
    assert (down["kind"], down["removed"], down["nodes"]) == ("down", ["n2"], ["n1"])
    assert runner.loop.last_reconfig_s == 33.0  # the warm-up runs from when the change took effect


def test_recommend_only_logs_nothing_and_changes_nothing(tmp_path: Path) -> None:
    backend = FakeBackend()
    runner = LiveRunner(backend, Scripted([3]), LMAP, _config(recommend_only=True), tmp_path / "state.json")
    record = runner.step()
    assert record is not None and not record.applied and record.reconfiguration is not None
    assert backend.applied == [] and not (tmp_path / "reconfigurations.jsonl").exists()
