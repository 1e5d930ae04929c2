"""What the controller sees of the network in the simulator (`latency_source`, docs/events.md "What the controller
sees"): the operator's map without an events file's link entries, or RTTs measured every period. A degradation the
map does not state is missed with `map` and, with `measured`, logged within two control periods and answered by a
move; a map wrong from the start is corrected within two periods; a run whose network is its map is unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gesscale.config import ControllerConfig
from gesscale.mape import ControlLoop
from gesscale.policies.base import make_policy
from gesscale.scenario import scenario_from_dict, with_events
from gesscale.sim_backend import SimBackend
from gesscale.simulate import network_view, run_once
from tests.test_sim_events import scenario as tiny

ROOT = Path(__file__).resolve().parents[1]
PERIOD = 60


def pi10(events: list[dict] | None = None) -> object:
    """The pi10 fog (Stockholm and Helsinki, 6.9 ms apart, hold the first placement), 20 minutes of steady input."""
    sc = scenario_from_dict({
        "name": "pi10-steady", "control_period_s": PERIOD,
        "cluster": {"latency_map": str(ROOT / "inventory/latency/pi10.yaml"), "min_replicas": 1, "max_replicas": 4},
        "operator": {"alpha": 60.0, "beta": 0.9, "gamma": 0.1, "noise": 0.0, "reconfig_pause_s": 30,
                     "initial_replicas": 2},
        "workload": {"kind": "steps", "levels": [100] * 20, "step_s": 60},
    })
    return with_events(sc, events, "ev.yaml") if events else sc


@pytest.mark.parametrize("t_event", [301, 330, 360])
def test_a_degradation_the_map_does_not_state_is_measured_within_two_periods_and_moved_off(t_event: int) -> None:
    sc = pi10([{"t_s": t_event, "node": "pi04", "add_rtt_ms": 60}])  # pi03-pi04: 6.9 -> 66.9 ms
    blind = run_once(sc, "static", seed=1, keep_history=True)
    assert not [h for h in blind.history if h.applied] and blind.metrics.moves == 0  # the map's view: unseen
    assert blind.history[-1].observation.replicas == ("pi03", "pi04") and blind.latency_changes == []
    assert blind.history[-1].observation.nd_max_ms == pytest.approx(66.9)  # the fog did degrade

    run = run_once(sc, "static", seed=1, keep_history=True, latency_source="measured")
    seen = [h for h in run.history if any((c.a, c.b) == ("pi03", "pi04") for c in h.network_changes)]
    detected = seen[0].observation.time_s
    assert t_event < detected <= t_event + 2 * PERIOD
    change = next(c for c in seen[0].network_changes if (c.a, c.b) == ("pi03", "pi04"))
    assert (change.old_ms, change.new_ms, change.time_s) == (6.9, pytest.approx(66.9), detected)
    assert change in run.latency_changes
    moves = [h.reconfiguration for h in run.history if h.applied]
    assert len(moves) == 1 and run.metrics.moves == 1 and run.metrics.reconfigurations == 0
    move = moves[0]
    assert move.kind == "move" and move.time_s == detected and move.removed == ("pi04",) and move.added == ("pi05",)
    assert move.nd_max_ms == pytest.approx(7.2) and run.history[-1].observation.replicas == ("pi03", "pi05")


@pytest.mark.parametrize("source", ["measured", "both"])
def test_a_map_wrong_from_the_start_is_corrected_within_two_periods(source: str) -> None:
    sc = pi10([{"t_s": 0, "pair": ["pi01", "pi02"], "rtt_ms": 80}])  # the map says 1 ms; the fog has 80
    operator = sc.latency_map.documented
    assert operator.rtt("pi01", "pi02") == 1.0 and sc.latency_map.at(0).rtt("pi01", "pi02") == 80.0
    views = []
    for name in ("map", source):  # the loop as `run_once` builds it, so that its view can be read
        seen = network_view(sc, name)
        ctl = ControlLoop(SimBackend(sc, measured=seen.measured), make_policy("static"), seen.latency_map,
                          ControllerConfig(control_period_s=PERIOD), network=seen.network, network_log=seen.log)
        views.append([(ctl.step().observation.time_s, ctl.current_map.rtt("pi01", "pi02")) for _ in range(3)])
        if seen.measured is not None:
            assert [str(c) for c in ctl.history[0].network_changes] == ["pi01-pi02 1 -> 80 ms"]
    assert views[0] == [(60.0, 1.0), (120.0, 1.0), (180.0, 1.0)]  # the map's view stays wrong
    # measured: right from the first round of probes on (a pair's first sample is taken as is), so within two
    assert views[1] == [(60.0, 80.0), (120.0, 80.0), (180.0, 80.0)]


def test_the_map_view_follows_the_maps_own_changes_not_the_events_files() -> None:
    degrade = {"t_s": 15, "node": "a", "add_rtt_ms": 200}
    own = run_once(tiny(changes=[degrade]), "static", seed=1, keep_history=True)
    told = run_once(tiny([degrade]), "static", seed=1, keep_history=True)
    assert own.metrics.moves == 1 and told.metrics.moves == 0
    assert max(h.observation.nd_max_ms for h in told.history) == 210.0  # the fog did degrade


@pytest.mark.parametrize("policy", ["gesscale", "thr-nlaware"])
def test_a_run_whose_network_is_its_map_is_the_same_for_every_source(policy: str) -> None:
    sc = tiny(levels=300)  # the policies scale up and down: every decision places on the view
    runs = [run_once(sc, policy, seed=2, keep_history=True, latency_source=s) for s in ("map", "measured", "both")]
    for other in runs[1:]:
        assert other.metrics == runs[0].metrics
        for key in ("processed", "backlog", "supply"):
            assert np.array_equal(getattr(other, key), getattr(runs[0], key))


def test_an_experiment_measures_when_its_controller_says_so_and_its_decision_log_has_the_changes() -> None:
    from gesscale.experiment.decisions import DecisionLog
    from gesscale.experiment.spec import spec_from_dict

    spec = spec_from_dict({"scenario": str(ROOT / "scenarios/pi10-taxi.yaml"), "policies": ["static"],
                           "controller": {"latency_source": "both"}}, "x.yaml")
    assert spec.controller == {"latency_source": "both"}
    log = DecisionLog("static", 1, None)
    run_once(pi10([{"t_s": 330, "node": "pi04", "add_rtt_ms": 60}]), "static", seed=1, on_step=log,
             **spec.controller)
    logged = {row["t_s"]: row["network"] for row in log.rows if row["network"]}
    assert list(logged) == [420.0] and "pi03-pi04 6.9 -> 66.9 ms" in logged[420.0]


class UpAfter:
    """A latency-aware policy that asks for one more replica at every period from `t_s` on (back pressure), and
    records when it was asked."""

    id = "up-after-test"
    latency_aware = True
    instant = False

    def __init__(self, t_s: float) -> None:
        self.t_s, self.asked = t_s, []

    def decide(self, obs, ctx):  # noqa: ANN001, ANN201 - the Policy interface
        from gesscale.observation import Decision

        self.asked.append(obs.time_s)
        return Decision(obs.n + 1 if obs.time_s >= self.t_s else obs.n, "test")

    def state_dict(self) -> dict:
        return {}


def held_loop(sc: object, policy: object, hold: bool) -> ControlLoop:
    seen = network_view(sc, "measured")
    backend = SimBackend(sc, seed=1, measured=seen.measured)
    config = ControllerConfig(control_period_s=PERIOD, warmup_s=0, min_replicas=1, max_replicas=4,
                              latency_source="measured")
    return ControlLoop(backend, policy, seen.latency_map, config, network=seen.network, network_log=seen.log,
                       network_unconfirmed=seen.unconfirmed if hold else None)


def test_a_scale_up_beside_links_whose_rise_is_not_confirmed_yet_is_held_a_period_then_a_move() -> None:
    sc = pi10([{"t_s": 330, "node": "pi04", "add_rtt_ms": 60}])  # pi03-pi04: 6.9 -> 66.9 ms
    policy = UpAfter(360)
    loop = held_loop(sc, policy, hold=True)
    records = {r.observation.time_s: r for r in (loop.step() for _ in range(8))}
    held = records[360.0]  # the first round after the rise: one sample of it, not in the view yet
    assert held.reconfiguration is None and held.decision.reason.startswith("hold: the links pi03-pi04 rose")
    assert 360.0 not in policy.asked  # the policy does not learn from the period the rise distorted
    move = records[420.0].reconfiguration  # the second round takes the rise: the scale-up becomes a move
    assert move is not None and move.kind == "move" and move.removed == ("pi04",) and move.added == ("pi05",)
    assert [r.reconfiguration.kind for r in records.values() if r.reconfiguration][0] == "move"

    blind = held_loop(sc, UpAfter(360), hold=False)  # without the hold: a scale-up beside pi04 first
    first = next(r.reconfiguration for r in (blind.step() for _ in range(8)) if r.reconfiguration)
    assert first.kind == "up" and first.time_s == 360.0 and "pi04" in first.nodes


def test_a_rise_between_a_used_and_an_unused_node_holds_nothing() -> None:
    sc = pi10([{"t_s": 330, "node": "pi07", "add_rtt_ms": 60}])  # pi07 hosts no replica
    policy = UpAfter(360)
    loop = held_loop(sc, policy, hold=True)
    records = {r.observation.time_s: r for r in (loop.step() for _ in range(7))}
    assert 360.0 in policy.asked and records[360.0].reconfiguration is not None
    assert records[360.0].reconfiguration.kind == "up"
