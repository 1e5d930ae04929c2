"""The site view (`gesscale.site_view`) and `model_latency: site` through the controller, the simulator and the twin.

The view's ND_max of a placement is its farthest replica's RTT to the site, whatever the RTTs among the replicas;
placement on it adds the node nearest to the site. The small map below tells the two variables apart: s is the
site, p and q are 5 ms from it but 100 ms from each other, r is 30 ms from the site and 10 ms from p and q. Grown
from [s] to three replicas, ND_max takes [s, p, r] (ND_max 30, the farthest from the site 30 ms), the site view
[s, p, q] (ND_max 100, the farthest from the site 5 ms).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gesscale import placement
from gesscale.backend import Backend
from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from gesscale.mape import ControlLoop
from gesscale.model import Measurement, PerformanceModel
from gesscale.observation import NodeState, Observation, Placement
from gesscale.policies.base import make_policy
from gesscale.scenario import scenario_from_dict
from gesscale.simulate import run_once
from gesscale.site_view import SiteView, placement_view
from gesscale.twin import build_twin
from tests.test_mape import Scripted

STAR = latency_map_from_dict({
    "nodes": ["s", "p", "q", "r"],
    "rtt_ms": {"s": {"p": 5.0, "q": 5.0, "r": 30.0}, "p": {"q": 100.0, "r": 10.0}, "q": {"r": 10.0}},
})


@st.composite
def maps(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(2, 9))
    names = [f"n{i}" for i in range(n)]
    pairs = list(itertools.combinations(range(n), 2))
    rtts = draw(st.lists(st.sampled_from((0.5, 1.0, 2.5, 7.7, 10.0, 38.1)), min_size=len(pairs),
                         max_size=len(pairs)))
    doc = {"nodes": names, "rtt_ms": {}}
    for (i, j), v in zip(pairs, rtts, strict=True):
        doc["rtt_ms"].setdefault(names[i], {})[names[j]] = v
    lmap = latency_map_from_dict(doc, "random")
    site = draw(st.sampled_from(names))
    chosen = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
    return lmap, site, chosen


@settings(max_examples=200, deadline=None)
@given(maps())
def test_the_views_nd_max_is_the_farthest_replicas_rtt_to_the_site(case: tuple) -> None:
    lmap, site, chosen = case
    view = SiteView(lmap, site)
    to_site = {v: lmap.rtt(v, site) for v in lmap.names}
    expected = max(to_site[v] for v in chosen) if len(chosen) > 1 else 0.0
    assert view.nd_max(chosen) == expected
    assert placement.nd_max(view, chosen) == expected
    block = view.block(chosen)
    for (a, x), (b, y) in itertools.product(enumerate(chosen), repeat=2):
        assert block[a, b] == max(to_site[x], to_site[y])  # the diagonal: the node's own RTT to the site
        assert view.rtt(x, y) == (0.0 if x == y else block[a, b])
    rows = np.stack([view.row(i) for i in range(len(lmap.names))])
    assert np.allclose(view.memo()["column_sums"], rows.sum(axis=0))  # the sorted shortcut, against every row


@settings(max_examples=200, deadline=None)
@given(maps())
def test_placement_on_the_view_adds_the_nearest_to_the_site_and_removes_the_farthest(case: tuple) -> None:
    lmap, site, chosen = case
    view = SiteView(lmap, site)
    dist = {v: lmap.rtt(v, site) for v in lmap.names}
    grown = placement.grow(view, [], lmap.names, len(lmap.names))
    assert [dist[v] for v in grown] == sorted(dist[v] for v in grown)  # nearest to the site first
    removed = placement.shrink(view, chosen, len(chosen) - 1)
    if len(chosen) > 2:
        assert dist[removed[0]] == max(dist[v] for v in chosen)  # the farthest goes first


def test_the_star_map_tells_the_two_variables_apart() -> None:
    g = STAR.placement_graph()
    view = SiteView(STAR, "s")
    assert placement.grow(g, ["s"], STAR.names, 2) == ["p", "r"]
    assert placement.grow(view, ["s"], STAR.names, 2) == ["p", "q"]
    assert (STAR.nd_max(["s", "p", "q"]), view.nd_max(["s", "p", "q"])) == (100.0, 5.0)
    assert (STAR.nd_max(["s", "p", "r"]), view.nd_max(["s", "p", "r"])) == (30.0, 30.0)


def test_a_site_not_on_the_map_and_site_latency_without_a_site_are_refused() -> None:
    with pytest.raises(UserError, match="not a node"):
        SiteView(STAR, "zz")
    with pytest.raises(UserError, match="needs a site"):
        placement_view(STAR, "site", None)


class StarBackend(Backend):
    """The star map's nodes, a clock one period per `observe`, the placement applied at once; `site` as given."""

    def __init__(self, site: str | None) -> None:
        self.site = site
        self.replicas: tuple[str, ...] = ("s",)
        self.t = 0.0

    def nodes(self) -> list[NodeState]:
        return [NodeState(n) for n in STAR.names]

    def current(self) -> Placement:
        return Placement(self.replicas, STAR.nd_max(self.replicas))

    def observe(self) -> Observation:
        self.t += 10.0
        return Observation(time_s=self.t, period_s=10.0, input_rate=100.0, throughput=100.0, backlog=0.0,
                           backlog_growth=0.0, bp_upstream=0.0, bp_operator=0.0, replicas=self.replicas,
                           nd_max_ms=STAR.nd_max(self.replicas))

    def apply(self, placement: Placement, instant: bool = False) -> float:
        self.replicas = placement.nodes
        return 0.0

    @property
    def finished(self) -> bool:
        return False


def test_the_loop_places_and_labels_the_models_points_in_its_model_latency() -> None:
    by_site = ControlLoop(StarBackend("s"), Scripted([3, 3]), STAR, ControllerConfig(model_latency="site"))
    first = by_site.step()
    assert first.reconfiguration is not None and first.reconfiguration.nodes == ("s", "p", "q")
    assert first.reconfiguration.nd_max_ms == 5.0  # the reconfiguration's latency is the model's
    second = by_site.step()
    assert second.observation.nd_max_ms == 5.0  # the period's point: the farthest RTT to the site
    assert second.observation.extra["placement_nd_max_ms"] == 100.0  # the backend's ND_max, kept
    by_nd = ControlLoop(StarBackend("s"), Scripted([3]), STAR, ControllerConfig())
    rec = by_nd.step().reconfiguration
    assert rec is not None and rec.nodes == ("s", "p", "r") and rec.nd_max_ms == 30.0


def test_the_loop_refuses_site_latency_without_a_site_and_a_model_in_another_latency() -> None:
    with pytest.raises(UserError, match="needs a site"):
        ControlLoop(StarBackend(None), Scripted(), STAR, ControllerConfig(model_latency="site"))
    policy = make_policy("gesscale")
    policy.model = PerformanceModel().fit([Measurement(1, 0.0, 100.0), Measurement(2, 30.0, 150.0)])
    with pytest.raises(UserError, match="model_latency"):
        ControlLoop(StarBackend("s"), policy, STAR, ControllerConfig(model_latency="site"))
    assert PerformanceModel().use_latency("site").latency == "site"  # an empty model takes it
    assert PerformanceModel.from_dict(PerformanceModel(latency="site").to_dict()).latency == "site"


def _star_scenario(**operator: Any) -> dict[str, Any]:
    return {"name": "star", "control_period_s": 10,
            "cluster": {"latency_map": {"nodes": STAR.names, "rtt_ms": {"s": {"p": 5, "q": 5, "r": 30},
                                                                      "p": {"q": 100, "r": 10}, "q": {"r": 10}}},
                        "site": "s", "min_replicas": 1, "max_replicas": 4},
            "operator": {"alpha": 100.0, "beta": 1.0, "gamma": 5.0, "noise": 0.0, "reconfig_pause_s": 0,
                         "initial_replicas": 1, **operator},
            "workload": {"kind": "steps", "levels": [150.0, 250.0], "step_s": 300}, "seed": 1}


def test_the_simulated_operator_takes_the_site_latency_and_the_controller_follows() -> None:
    sc = scenario_from_dict(_star_scenario(latency="site"), "star")
    assert sc.site == "s" and sc.truth.latency == "site"
    from gesscale.sim_backend import SimBackend

    backend = SimBackend(sc)
    # the best placements of each size by the truth's variable: 100 n - 5 x (farthest RTT to the site)
    assert backend.best_mst_by_n() == [0.0, 100.0, 175.0, 275.0, 250.0]
    res = run_once(sc, "gesscale", 1, keep_history=True, model_latency="site")
    placed = [r.reconfiguration.nodes for r in res.history if r.reconfiguration is not None]
    assert placed and max(len(p) for p in placed) == 3
    assert all("r" not in p for p in placed)  # three replicas: s, p, q (5 ms from the site), never r (30 ms)
    bad = _star_scenario(latency="site")
    del bad["cluster"]["site"]
    with pytest.raises(UserError, match="cluster.site"):
        scenario_from_dict(bad, "star")
    bad["cluster"]["site"] = "zz"
    with pytest.raises(UserError, match="site"):
        scenario_from_dict(bad, "star")


def test_the_twin_of_a_run_in_site_latency_takes_the_site_latency() -> None:
    periods = [{"time_s": 10.0 * k, "period_s": 10.0, "input_rate": 100.0, "throughput": 100.0, "backlog": 0.0,
                "backlog_growth": 0.0, "bp_upstream": 0.0, "bp_operator": 0.0, "replicas": ["s"], "nd_max_ms": 0.0,
                "input_offset": 1000 * k} for k in range(1, 6)]
    doc = STAR.to_dict()
    scen, measured = build_twin(periods, [], None, doc, 4, None, 10.0, model_latency="site", site="s")
    assert scen["operator"]["latency"] == "site" and scen["cluster"]["site"] == "s"
    assert scen["controller"]["model_latency"] == "site" and measured["model_latency"] == "site"
    sc = scenario_from_dict(scen, "twin")
    assert sc.truth.latency == "site" and sc.site == "s"
    plain, _ = build_twin(periods, [], None, doc, 4, None, 10.0)
    assert "latency" not in plain["operator"] and "site" not in plain["cluster"]


def test_a_calibration_in_site_latency_labels_its_points_and_its_model() -> None:
    from gesscale.probe import SimProbeTarget, calibrate

    sc = scenario_from_dict(_star_scenario(latency="site"), "star")
    configs = [("s",), ("s", "p"), ("s", "r"), ("s", "p", "q"), ("s", "p", "r")]
    cal = calibrate(SimProbeTarget(sc.truth, sc.latency_map, 1, site="s"), sc.latency_map, configs,
                    latency="site", site="s")
    assert [r.nd_max_ms for r in cal.results] == [0.0, 5.0, 30.0, 5.0, 30.0]  # the farthest RTT to the site
    assert cal.model.latency == "site" and cal.model.to_dict()["params"]["latency"] == "site"
    # the truth in that latency: s+p+q (ND_max 100) sustains 100 x 3 - 5 x 5 = 275/s
    assert cal.results[3].mst == pytest.approx(275.0, rel=0.05)
    with pytest.raises(UserError, match="needs the site"):
        calibrate(SimProbeTarget(sc.truth, sc.latency_map, 1, site="s"), sc.latency_map, configs, latency="site")


def test_a_live_controller_refuses_a_starting_model_in_another_latency() -> None:
    from gesscale.runner import LiveRunner

    model = PerformanceModel().fit([Measurement(1, 0.0, 100.0), Measurement(2, 30.0, 150.0)])
    with pytest.raises(UserError, match="model file's points are in latency 'nd_max'"):
        LiveRunner(StarBackend("s"), "gesscale", STAR, ControllerConfig(model_latency="site"), None,
                       initial_model=model)
    site_model = PerformanceModel(latency="site").fit(model.measurements_)
    ctl = LiveRunner(StarBackend("s"), "gesscale", STAR, ControllerConfig(model_latency="site"), None,
                         initial_model=site_model)
    assert ctl.step() is not None


def test_a_resumed_model_in_another_latency_is_refused(tmp_path: Any) -> None:
    """The check holds for a model the loop resumes from its state, not only one it is given."""
    state = tmp_path / "controller.json"
    policy = make_policy("gesscale")
    policy.model = PerformanceModel().fit([Measurement(1, 0.0, 100.0), Measurement(2, 30.0, 150.0)])
    ControlLoop(StarBackend("s"), policy, STAR, ControllerConfig(), state_path=state).step()
    with pytest.raises(UserError, match="model_latency"):
        ControlLoop(StarBackend("s"), make_policy("gesscale"), STAR, ControllerConfig(model_latency="site"),
                    state_path=state)
