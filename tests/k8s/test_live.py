"""Acceptance: a scale-up then a scale-down on a 5-node cluster, live strategy, through the MAPE loop."""

from __future__ import annotations

from gesscale.config import ControllerConfig
from gesscale.mape import ControlLoop
from tests.fixtures.k8s import APP, NODES
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

    writes = [(r.method, r.path, r.body) for r in fake_kube.writes()]
    hook = [(m, p, b) for m, p, b in fake_driver.hook_calls()]
    assert writes[0] == ("PATCH", "/api/v1/nodes/n4", {"metadata": {"labels": {POOL: APP}}})
    assert hook[0] == ("POST", "/executors/target", {"target": 3, "wait_s": 0.0})
    assert writes[1][:2] == ("POST", "/api/v1/namespaces/fog/events")
    assert writes[1][2]["reason"] == "ScaledUp"
    assert hook[1] == ("POST", "/executors/remove", {"ids": ["1"], "wait_s": 0.0})  # executor 1 ran on n1
    assert writes[2] == ("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {POOL: None}}})
    assert writes[3][:2] == ("POST", "/api/v1/namespaces/fog/events")
    assert writes[3][2]["reason"] == "ScaledDown"
    assert len(writes) == 4 and len(hook) == 2
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
