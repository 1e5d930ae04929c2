"""The MAPE loop (`gesscale/mape.py`) driven directly against a fake backend: no simulator, no cluster.

One step (observe, decide, place, apply), the warm-up after a change, the replica bounds, recommend-only, the
latency map the policy is given (and `network(t)`), the `on_step` callback and the history, the state file
written every period and resumed by a new loop, and what happens when the backend raises.

The map has five nodes: a, b, c form a tight group (RTT 10-20 ms), d is further (60-80 ms), e is far (90 ms); at
t = 100 s node c degrades by 200 ms. Latency-aware placement grows [a] to [a, b], [a, b] to [a, b, c] (to
[a, b, d] once c has degraded), and shrinks [a, b, c] by removing c.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gesscale.backend import Backend, ObservationUnavailable, ReconfigurationFailed
from gesscale.config import ControllerConfig
from gesscale.latency_map import latency_map_from_dict
from gesscale.mape import ControlLoop, StepRecord
from gesscale.observation import Decision, NodeState, Observation, Placement
from gesscale.policies.base import Policy, PolicyContext, make_policy

PERIOD = 10.0
PAUSE = 2.5

LMAP = latency_map_from_dict({
    "nodes": ["a", "b", "c", "d", "e"],
    "rtt_ms": {
        "a": {"b": 10.0, "c": 20.0, "d": 80.0, "e": 90.0},
        "b": {"c": 15.0, "d": 70.0, "e": 90.0},
        "c": {"d": 60.0, "e": 90.0},
        "d": {"e": 90.0},
    },
    "changes": [{"t_s": 100, "node": "c", "add_rtt_ms": 200}],
})


class FakeBackend(Backend):
    """Nodes of the map (and one the map does not know), a clock advancing one period per `observe`, scripted
    metrics per period, and the calls to `apply` recorded; failures can be injected."""

    def __init__(self, replicas: tuple[str, ...] = ("a",), *, cordoned: tuple[str, ...] = (),
                 down: tuple[str, ...] = (), periods: int | None = None, start_s: float = 0.0) -> None:
        self.replicas = replicas
        self.cordoned = cordoned
        self.down = down
        self.periods = periods
        self.t = start_s
        self.observed = 0
        self.metrics: list[dict[str, Any]] = []  # per observation: Observation fields to override (then defaults)
        self.applied: list[tuple[Placement, bool]] = []
        self.apply_error: Exception | None = None
        self.apply_changes_then_fails = False  # `apply` makes the change, then raises (a controller dying in it)
        self.observe_error: Exception | None = None

    def nodes(self) -> list[NodeState]:
        names = [*LMAP.names, "zz"]  # zz: a node of the cluster the latency map does not know
        return [NodeState(n, ready=n not in self.down, cordoned=n in self.cordoned) for n in names]

    def current(self) -> Placement:
        return Placement(self.replicas, LMAP.nd_max(self.replicas))

    def observe(self) -> Observation:
        if self.observe_error is not None:
            raise self.observe_error
        self.observed += 1
        self.t += PERIOD
        fields: dict[str, Any] = {"input_rate": 100.0, "throughput": 100.0, "backlog": 0.0, "backlog_growth": 0.0,
                                  "bp_upstream": 0.0, "bp_operator": 0.0, "cpu": 0.7}
        if self.metrics:
            fields.update(self.metrics.pop(0))
        return Observation(time_s=self.t, period_s=PERIOD, replicas=self.replicas,
                           nd_max_ms=LMAP.at(self.t).nd_max(self.replicas), **fields)

    def apply(self, placement: Placement, instant: bool = False) -> float:
        if self.apply_changes_then_fails:
            self.replicas = placement.nodes
            raise RuntimeError("controller died during apply")
        if self.apply_error is not None:
            raise self.apply_error
        self.applied.append((placement, instant))
        self.replicas = placement.nodes
        return PAUSE

    @property
    def finished(self) -> bool:
        return self.periods is not None and self.observed >= self.periods


class Scripted(Policy):
    """Asks for the scripted replica counts (or nodes) period after period and keeps every context it was given;
    its state (the script left and how many decisions it took) is what a resumed loop must give back."""

    id: ClassVar[str] = "scripted-mape-test"

    def __init__(self, targets: list[int | Decision] | None = None) -> None:
        self.targets: list[int | Decision] = list(targets or [])
        self.decided = 0
        self.contexts: list[PolicyContext] = []
        self.observations: list[Observation] = []

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        self.decided += 1
        self.contexts.append(ctx)
        self.observations.append(obs)
        nxt = self.targets.pop(0) if self.targets else obs.n
        return nxt if isinstance(nxt, Decision) else Decision(nxt, f"scripted {nxt}")

    def state_dict(self) -> dict[str, Any]:
        return {"targets": [t for t in self.targets if isinstance(t, int)], "decided": self.decided}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.targets = list(state.get("targets", []))
        self.decided = int(state.get("decided", 0))


class ScriptedUnaware(Scripted):
    """The same script with the random (seeded) placement of latency-unaware policies."""

    id: ClassVar[str] = "scripted-unaware-mape-test"
    latency_aware: ClassVar[bool] = False


class ScriptedInstant(Scripted):
    """The same script for a policy whose changes take no time (as the oracle's)."""

    id: ClassVar[str] = "scripted-instant-mape-test"
    instant: ClassVar[bool] = True


def config(**opts: Any) -> ControllerConfig:
    """A loop configuration with a 10 s period, no warm-up and up to 5 replicas unless told otherwise."""
    return ControllerConfig(**{"control_period_s": PERIOD, "warmup_s": 0.0, "max_replicas": 5, **opts})


# -- one step ------------------------------------------------------------------------------------------------
def test_scale_up_applies_the_latency_aware_placement() -> None:
    backend = FakeBackend(("a", "b"))
    loop = ControlLoop(backend, Scripted([3]), LMAP, config())
    rec = loop.step()
    assert rec.observation.time_s == PERIOD and rec.observation.replicas == ("a", "b")
    assert rec.decision.target == 3 and rec.decision.add == ("c",) and rec.decision.remove == ()
    assert rec.applied
    assert [(p.nodes, p.nd_max_ms, instant) for p, instant in backend.applied] == [(("a", "b", "c"), 20.0, False)]
    r = rec.reconfiguration
    assert r is not None
    assert (r.time_s, r.kind, r.added, r.removed, r.nodes, r.nd_max_ms, r.pause_s, r.reason) == \
        (PERIOD, "up", ("c",), (), ("a", "b", "c"), 20.0, PAUSE, "scripted 3")
    assert backend.replicas == ("a", "b", "c")
    assert loop.last_reconfig_s == PERIOD


def test_scale_down_removes_the_farthest_node() -> None:
    backend = FakeBackend(("a", "b", "c"))
    loop = ControlLoop(backend, Scripted([2]), LMAP, config())
    rec = loop.step()
    assert rec.decision.remove == ("c",) and rec.decision.add == ()
    assert rec.applied and rec.reconfiguration is not None
    assert rec.reconfiguration.kind == "down"
    assert rec.reconfiguration.removed == ("c",) and rec.reconfiguration.nodes == ("a", "b")
    assert rec.reconfiguration.nd_max_ms == 10.0
    assert [p.nodes for p, _ in backend.applied] == [("a", "b")]


def test_no_change_calls_no_apply() -> None:
    backend = FakeBackend(("a", "b"))
    loop = ControlLoop(backend, Scripted([2, 2]), LMAP, config())
    records = [loop.step(), loop.step()]
    assert backend.applied == []
    assert all(r.reconfiguration is None and not r.applied for r in records)
    assert [r.decision for r in records] == [Decision(2, "scripted 2")] * 2
    assert loop.last_reconfig_s == -math.inf


def test_nodes_named_by_the_policy_are_used_and_trimmed_to_the_target() -> None:
    backend = FakeBackend(("a",))
    loop = ControlLoop(backend, Scripted([Decision(2, "mine", add=("e", "d"))]), LMAP, config())
    rec = loop.step()
    assert rec.decision.add == ("e",)  # the policy's own choice (not the latency-aware b), one node for +1
    assert [p.nodes for p, _ in backend.applied] == [("a", "e")]
    assert rec.reconfiguration is not None and rec.reconfiguration.nd_max_ms == 90.0


def test_latency_unaware_placement_is_random_but_seeded() -> None:
    def added(seed: int) -> tuple[str, ...]:
        loop = ControlLoop(FakeBackend(("a",)), ScriptedUnaware([4]), LMAP, config(seed=seed))
        return loop.step().decision.add

    first = added(7)
    assert len(first) == 3 and "a" not in first and set(first) <= {"b", "c", "d", "e"}
    assert added(7) == first  # the config's seed drives the choice
    assert any(added(s) != first for s in range(1, 20))  # and it is not the fixed latency-aware order


def test_instant_policies_ask_the_backend_for_an_instant_change() -> None:
    backend = FakeBackend(("a",))
    ControlLoop(backend, ScriptedInstant([2]), LMAP, config()).step()
    assert [instant for _, instant in backend.applied] == [True]


def test_run_steps_until_the_backend_has_finished_or_max_steps() -> None:
    loop = ControlLoop(FakeBackend(periods=4), Scripted(), LMAP, config())
    assert len(loop.run(max_steps=3)) == 3
    assert len(loop.run()) == 4  # one more, then the backend has finished
    assert [r.observation.time_s for r in loop.history] == [10.0, 20.0, 30.0, 40.0]


# -- warm-up -------------------------------------------------------------------------------------------------
def test_warmup_after_a_reconfiguration_with_a_threshold_policy() -> None:
    backend = FakeBackend(("a",))
    backend.metrics = [{"cpu": 0.95}] * 6
    loop = ControlLoop(backend, make_policy("thr-nlaware"), LMAP, config(warmup_s=30.0))
    records = [loop.step() for _ in range(5)]
    # t=10 up; t=20, 30 within the 30 s warm-up; t=40 (30 s after) up again; t=50 warm-up again.
    assert [r.applied for r in records] == [True, False, False, True, False]
    assert [r.decision.reason for r in records[1:3]] == ["warm-up", "warm-up"]
    assert records[4].decision.reason == "warm-up"
    assert [p.nodes for p, _ in backend.applied] == [("a", "b"), ("a", "b", "c")]


def test_the_policy_is_told_when_the_input_ends_if_that_is_known() -> None:
    ends = []
    for loop_end in (None, 3600.0):
        policy = Scripted()
        ControlLoop(FakeBackend(("a",)), policy, LMAP, config(), input_end_s=loop_end).step()
        ends.append(policy.contexts[0].input_end_s)
    assert ends == [None, 3600.0]  # unknown (an unbounded stream), and the end the loop was given (the simulator's)


def test_the_simulator_tells_the_loop_its_input_end(monkeypatch: pytest.MonkeyPatch) -> None:
    import gesscale.simulate as simulate
    from gesscale.scenario import load_scenario

    given: list[float | None] = []

    class Recording(ControlLoop):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            given.append(kwargs.get("input_end_s"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(simulate, "ControlLoop", Recording)
    sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "pi10-taxi.yaml")
    result = simulate.run_once(sc, "static", 1)
    assert given == [result.duration_s]


def test_the_policy_is_told_the_time_since_the_last_reconfiguration() -> None:
    policy = Scripted([2, 2, 2, 3, 3])
    loop = ControlLoop(FakeBackend(("a",)), policy, LMAP, config(warmup_s=25.0))
    for _ in range(5):
        loop.step()
    since = [c.since_reconfig_s for c in policy.contexts]
    assert since == [math.inf, 10.0, 20.0, 30.0, 10.0]  # changes at t=10 and t=40
    assert [c.in_warmup for c in policy.contexts] == [False, True, True, False, True]


def test_catching_up_when_the_backlog_shrinks() -> None:
    backend = FakeBackend(("a",))
    backend.metrics = [{"backlog_growth": -5.0}, {"backlog_growth": 0.0}]
    policy = Scripted()
    loop = ControlLoop(backend, policy, LMAP, config())
    loop.step()
    loop.step()
    assert [c.catching_up for c in policy.contexts] == [True, False]


# -- bounds ------------------------------------------------------------------------------------------------
def test_targets_are_clamped_to_min_and_max_replicas() -> None:
    backend = FakeBackend(("a", "b"))
    policy = Scripted([10, 0])
    loop = ControlLoop(backend, policy, LMAP, config(min_replicas=2, max_replicas=3))
    up = loop.step()
    assert up.decision.target == 3 and up.decision.add == ("c",)
    down = loop.step()
    assert down.decision.target == 2 and down.decision.remove == ("c",)
    assert [p.nodes for p, _ in backend.applied] == [("a", "b", "c"), ("a", "b")]
    assert (policy.contexts[0].n_min, policy.contexts[0].n_max) == (2, 3)


def test_max_replicas_0_means_every_schedulable_node_of_the_map() -> None:
    backend = FakeBackend(("a",), cordoned=("e",))  # zz is not in the map: never a candidate either
    policy = Scripted([99])
    loop = ControlLoop(backend, policy, LMAP, config(max_replicas=0))
    rec = loop.step()
    assert policy.contexts[0].candidates == ("a", "b", "c", "d")
    assert policy.contexts[0].n_max == 4
    assert rec.decision.target == 4 and rec.decision.add == ("b", "c", "d")
    assert [p.nodes for p, _ in backend.applied] == [("a", "b", "c", "d")]


def test_down_nodes_are_never_chosen_and_cap_n_max() -> None:
    backend = FakeBackend(("a",), down=("b", "c"))
    policy = Scripted([3])
    loop = ControlLoop(backend, policy, LMAP, config(max_replicas=8))
    rec = loop.step()
    assert policy.contexts[0].candidates == ("a", "d", "e") and policy.contexts[0].n_max == 3
    assert rec.decision.add == ("d", "e")


# -- recommend-only ------------------------------------------------------------------------------------------
def test_recommend_only_records_the_decision_and_changes_nothing(tmp_path: Path) -> None:
    backend = FakeBackend(("a", "b"))
    backend.metrics = [{"cpu": 0.95}] * 2
    state = tmp_path / "state.json"
    loop = ControlLoop(backend, make_policy("thr-nlaware"), LMAP, config(recommend_only=True, warmup_s=30.0),
                       state_path=state)
    first, second = loop.step(), loop.step()
    assert backend.applied == [] and backend.replicas == ("a", "b")
    for rec in (first, second):
        assert not rec.applied
        assert rec.decision.add == ("c",)
        r = rec.reconfiguration
        assert r is not None and r.kind == "up" and r.nodes == ("a", "b", "c") and r.pause_s == 0.0
    # Nothing changed, so no warm-up: the second period decides (and recommends) again.
    assert second.decision.reason != "warm-up"
    assert loop.last_reconfig_s == -math.inf
    saved = json.loads(state.read_text())
    assert saved["last_reconfig_s"] is None and saved["pending"] is None


# -- the network ---------------------------------------------------------------------------------------------
def test_without_network_the_map_given_stays_in_force() -> None:
    backend = FakeBackend(("a", "b"), start_s=100.0)  # past the change of c
    policy = Scripted([3])
    rec = ControlLoop(backend, policy, LMAP, config()).step()
    assert rec.decision.add == ("c",)
    assert rec.reconfiguration is not None and rec.reconfiguration.nd_max_ms == 20.0
    assert policy.contexts[0].graph["a"]["c"]["weight"] == 20.0


def test_network_gives_the_policy_the_map_in_force() -> None:
    backend = FakeBackend(("a", "b"), start_s=80.0)
    policy = Scripted([2, 3])
    loop = ControlLoop(backend, policy, LMAP, config(), network=LMAP.at)
    loop.step()  # t=90: before the change
    assert policy.contexts[0].graph["a"]["c"]["weight"] == 20.0
    rec = loop.step()  # t=100: c has degraded by 200 ms, d is now the nearest free node
    assert policy.contexts[1].graph["a"]["c"]["weight"] == 220.0
    assert rec.decision.add == ("d",)
    assert rec.reconfiguration is not None and rec.reconfiguration.nd_max_ms == 80.0
    assert [(p.nodes, p.nd_max_ms) for p, _ in backend.applied] == [(("a", "b", "d"), 80.0)]
    assert loop.current_map is LMAP.at(100.0)


def test_network_is_asked_at_the_backends_time() -> None:
    asked: list[float] = []

    def network(t: float) -> Any:
        asked.append(t)
        return LMAP.at(t)

    loop = ControlLoop(FakeBackend(start_s=5.0), Scripted(), LMAP, config(), network=network)
    loop.step()
    loop.step()
    assert asked == [15.0, 25.0]


# -- on_step and history -------------------------------------------------------------------------------------
def test_on_step_gets_each_record_of_the_history() -> None:
    seen: list[StepRecord] = []
    backend = FakeBackend(("a",))
    policy = Scripted([2, 2, 1])
    loop = ControlLoop(backend, policy, LMAP, config(), on_step=seen.append)
    returned = [loop.step() for _ in range(3)]
    assert seen == returned == loop.history
    assert all(s is r for s, r in zip(seen, returned, strict=True))
    assert [r.observation for r in seen] == policy.observations  # the backend's observation, as given
    assert [(r.applied, r.reconfiguration.kind if r.reconfiguration else None) for r in seen] == \
        [(True, "up"), (False, None), (True, "down")]
    assert seen[2].reconfiguration is not None and seen[2].reconfiguration.removed == ("b",)


# -- state: saved and resumed --------------------------------------------------------------------------------
def test_state_is_saved_every_step(tmp_path: Path) -> None:
    state = tmp_path / "sub" / "state.json"
    loop = ControlLoop(FakeBackend(("a",)), Scripted([2, 2, 2]), LMAP, config(), state_path=state)
    loop.step()
    saved = json.loads(state.read_text())
    assert saved["policy"] == Scripted.id
    assert saved["policy_state"] == {"targets": [2, 2], "decided": 1}
    assert saved["last_reconfig_s"] == PERIOD and saved["pending"] is None
    loop.step()
    assert json.loads(state.read_text())["policy_state"] == {"targets": [2], "decided": 2}
    assert not state.with_suffix(".tmp").exists()


def test_a_new_loop_resumes_policy_state_warmup_and_rng(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    backend = FakeBackend(("a",))
    first = ControlLoop(backend, Scripted([2, 2, 3, 3]), LMAP, config(warmup_s=60.0), state_path=state)
    first.step()  # t=10: up to 2
    first.step()  # t=20
    first.rng.random()  # the rng moved on: the new loop must continue from here, not from the seed
    first._save()
    policy = Scripted()
    second = ControlLoop(backend, policy, LMAP, config(warmup_s=60.0), state_path=state)
    assert (policy.targets, policy.decided) == ([3, 3], 2)
    assert second.last_reconfig_s == PERIOD
    assert second.rng.getstate() == first.rng.getstate()
    assert second.resume_note == ""
    second.step()  # t=30: 20 s after the change, still in the warm-up the first loop started
    assert policy.contexts[0].since_reconfig_s == 20.0 and policy.contexts[0].in_warmup
    assert policy.decided == 3


def test_gesscale_policy_model_round_trips_through_the_state(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    backend = FakeBackend(("a",))
    backend.metrics = [{"bp_upstream": 0.9, "backlog": 500.0, "backlog_growth": 10.0, "throughput": 100.0},
                       {"bp_upstream": 0.9, "backlog": 900.0, "backlog_growth": 10.0, "throughput": 190.0}]
    first_policy = make_policy("gesscale")
    loop = ControlLoop(backend, first_policy, LMAP, config(), state_path=state)
    assert [loop.step().decision.target for _ in range(2)] == [2, 3]  # root of back pressure: +1 each period
    model = first_policy.state_dict()["model"]
    assert len(model["measurements"]) == 2
    resumed = make_policy("gesscale")
    ControlLoop(backend, resumed, LMAP, config(), state_path=state)
    assert resumed.state_dict() == first_policy.state_dict()


def test_another_policys_state_is_kept_beside_and_this_one_starts_afresh(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    ControlLoop(FakeBackend(("a",)), ScriptedUnaware([2]), LMAP, config(), state_path=state).step()
    policy = Scripted([3])
    loop = ControlLoop(FakeBackend(("a",)), policy, LMAP, config(), state_path=state)
    assert ScriptedUnaware.id in loop.resume_note
    assert (policy.targets, policy.decided) == ([3], 0) and loop.last_reconfig_s == -math.inf
    assert json.loads(state.read_text())["policy"] == Scripted.id
    kept = list(tmp_path.glob("state.*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["policy"] == ScriptedUnaware.id


# -- errors from the backend ---------------------------------------------------------------------------------
def test_a_failed_apply_propagates_and_leaves_the_change_pending(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    seen: list[StepRecord] = []
    backend = FakeBackend(("a",))
    backend.apply_error = ReconfigurationFailed("could not reach b; undone")
    loop = ControlLoop(backend, Scripted([2, 2]), LMAP, config(), state_path=state, on_step=seen.append)
    with pytest.raises(ReconfigurationFailed):
        loop.step()
    assert loop.history == [] and seen == [] and backend.replicas == ("a",)
    assert loop.last_reconfig_s == -math.inf  # nothing changed: no warm-up starts
    saved = json.loads(state.read_text())
    assert saved["pending"] == {"nodes": ["a", "b"], "nd_max_ms": 10.0, "time_s": PERIOD}
    # The next period plans again from what the backend shows.
    backend.apply_error = None
    rec = loop.step()
    assert rec.applied and rec.reconfiguration is not None and rec.reconfiguration.nodes == ("a", "b")
    assert json.loads(state.read_text())["pending"] is None


def test_a_change_made_before_the_controller_died_is_not_repeated(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    backend = FakeBackend(("a",))
    backend.apply_changes_then_fails = True
    with pytest.raises(RuntimeError):
        ControlLoop(backend, Scripted([2]), LMAP, config(warmup_s=60.0), state_path=state).step()
    assert backend.replicas == ("a", "b")  # the change took effect, but the loop did not record it
    backend.apply_changes_then_fails = False
    policy = Scripted([3])
    loop = ControlLoop(backend, policy, LMAP, config(warmup_s=60.0), state_path=state)
    assert loop.last_reconfig_s == PERIOD  # the warm-up runs from when the change was made
    assert json.loads(state.read_text())["pending"] is None
    loop.step()
    assert policy.contexts[0].since_reconfig_s == 10.0 and policy.contexts[0].in_warmup


def test_a_change_that_never_took_effect_is_planned_again_after_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    backend = FakeBackend(("a",))
    backend.apply_error = RuntimeError("killed")
    with pytest.raises(RuntimeError):
        ControlLoop(backend, Scripted([2]), LMAP, config(), state_path=state).step()
    backend.apply_error = None
    policy = Scripted([5])
    loop = ControlLoop(backend, policy, LMAP, config(), state_path=state)
    assert loop.last_reconfig_s == -math.inf
    assert (policy.targets, policy.decided) == ([], 1)  # the state saved with the pending change was resumed
    policy.targets = [2]
    rec = loop.step()
    assert rec.applied and [p.nodes for p, _ in backend.applied] == [("a", "b")]


def test_a_missing_observation_propagates_before_any_decision(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    backend = FakeBackend(("a",))
    backend.observe_error = ObservationUnavailable("no batch this period")
    policy = Scripted([2])
    loop = ControlLoop(backend, policy, LMAP, config(), state_path=state)
    with pytest.raises(ObservationUnavailable):
        loop.step()
    assert policy.decided == 0 and loop.history == [] and backend.applied == []
    assert not state.exists()
