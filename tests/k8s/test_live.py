"""Acceptance: a scale-up then a scale-down on a 5-node cluster, live strategy, through the MAPE loop."""

from __future__ import annotations

from gesscale.config import ControllerConfig
from gesscale.mape import ControlLoop
from gesscale.observation import Placement
from tests.fixtures.k8s import APP, NODES, changes
from tests.k8s.helpers import LMAP, POOL, ScriptedPolicy, build_cluster, executor_nodes, labelled, make_backend


def test_scale_up_then_down_makes_exactly_these_changes(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    nodes_before = fake_kube.objects(NODES)
    backend = make_backend(fake_kube, fake_driver)
    loop = ControlLoop(backend, ScriptedPolicy([3, 2]), LMAP, ControllerConfig(warmup_s=0, control_period_s=0.3))

    up = loop.step()
    assert up.applied and up.reconfiguration.added == ("n4",)  # min ND_max among n3, n4, n5
    assert executor_nodes(fake_driver) == {"n1", "n2", "n4"}
    down = loop.step()
    assert down.applied and down.reconfiguration.removed == ("n1",)  # greatest latency to the others
    assert executor_nodes(fake_driver) == {"n2", "n4"}
    assert labelled(fake_kube) == {"n2", "n4"}

    events = "/api/v1/namespaces/fog/events"
    steps = changes(fake_kube, fake_driver)
    assert [s[:3] for s in steps] == [
        ("api", "PATCH", "/api/v1/nodes/n4"),
        ("hook", "POST", "/executors/target"),
        ("api", "POST", events),
        ("hook", "POST", "/executors/remove"),
        ("api", "PATCH", "/api/v1/nodes/n1"),
        ("api", "POST", events),
    ]
    assert steps[0][3] == {"metadata": {"labels": {POOL: APP}}}  # label on the min-ND_max node
    assert steps[1][3] == {"target": 3, "wait_s": 0.0}  # the new target
    assert steps[2][3]["reason"] == "ScaledUp"
    assert steps[3][3] == {"ids": ["1"], "wait_s": 0.0}  # executor 1 ran on n1, the greatest-latency node
    assert steps[4][3] == {"metadata": {"labels": {POOL: None}}}  # label removed
    assert steps[5][3]["reason"] == "ScaledDown"
    # Nothing else changed on any node.
    nodes_after = fake_kube.objects(NODES)
    for name, obj in nodes_before.items():
        labels = dict(obj["metadata"]["labels"])
        if name == "n4":
            labels[POOL] = APP
        if name == "n1":
            labels.pop(POOL)
        assert nodes_after[name]["metadata"]["labels"] == labels
        assert nodes_after[name]["spec"] == obj["spec"]


def test_a_stray_pool_label_is_removed_before_a_scale_up(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.put(NODES, None, {**fake_kube.objects(NODES)["n3"], "metadata": {"name": "n3", "labels": {POOL: APP}}})
    backend = make_backend(fake_kube, fake_driver)
    backend.apply(Placement(("n1", "n2", "n4"), 20.0))  # n3 sorts before n4: the new executor would land there
    assert [s[:3] for s in changes(fake_kube, fake_driver)][:3] == [
        ("api", "PATCH", "/api/v1/nodes/n3"),
        ("api", "PATCH", "/api/v1/nodes/n4"),
        ("hook", "POST", "/executors/target"),
    ]
    assert executor_nodes(fake_driver) == {"n1", "n2", "n4"} and labelled(fake_kube) == {"n1", "n2", "n4"}
