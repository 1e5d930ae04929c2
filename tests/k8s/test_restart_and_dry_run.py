"""The restart strategy, the dry run (`recommend_only`) and the observation read from the driver."""

from __future__ import annotations

import pytest

from gesscale.config import ControllerConfig
from gesscale.exporter import ControllerMetrics
from gesscale.k8s.backend import ObservationUnavailable, ReconfigurationError
from gesscale.mape import ControlLoop
from gesscale.observation import Placement
from tests.fixtures.k8s import APP, DEPLOYMENTS, NAMESPACE, NODES, PODS, driver_pod
from tests.k8s.helpers import (
    LMAP,
    POOL,
    ScriptedPolicy,
    build_cluster,
    eventually,
    executor_nodes,
    labelled,
    make_backend,
    observation,
)

DEPLOY_PATH = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{APP}-driver"


def test_restart_stops_the_driver_relabels_and_starts_it_with_the_new_count(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.put(PODS, NAMESPACE, driver_pod())
    backend = make_backend(fake_kube, fake_driver, strategy="restart")
    pause = backend.apply(Placement(("n1", "n2", "n4"), 20.0))
    assert pause > 0  # measured: from the stop until the executors ran again
    writes = [(r.method, r.path, r.body) for r in fake_kube.writes()]
    assert writes[:3] == [
        ("PATCH", DEPLOY_PATH, {"spec": {"replicas": 0}}),
        ("PATCH", "/api/v1/nodes/n4", {"metadata": {"labels": {POOL: APP}}}),
        ("PATCH", DEPLOY_PATH, {"spec": {"replicas": 1, "template": {
            "metadata": {"annotations": {"gesscale.io/executors": "3"}}}}}),
    ]
    assert writes[3][1].endswith("/events") and len(writes) == 4
    assert fake_driver.hook_calls() == []  # the restart goes through the Deployment, not the hook
    assert executor_nodes(fake_driver) == {"n1", "n2", "n4"}
    assert fake_kube.objects(DEPLOYMENTS)[f"{APP}-driver"]["spec"]["replicas"] == 1


def test_restart_scale_down_unlabels_while_the_driver_is_stopped(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    backend = make_backend(fake_kube, fake_driver, strategy="restart")
    backend.apply(Placement(("n2",), 0.0))
    writes = [(r.method, r.path) for r in fake_kube.writes()]
    assert writes[:3] == [("PATCH", DEPLOY_PATH), ("PATCH", "/api/v1/nodes/n1"), ("PATCH", DEPLOY_PATH)]
    assert labelled(fake_kube) == {"n2"} and executor_nodes(fake_driver) == {"n2"}


def test_restart_without_the_driver_deployment_changes_nothing(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.delete(DEPLOYMENTS, NAMESPACE, f"{APP}-driver")
    backend = make_backend(fake_kube, fake_driver, strategy="restart")
    with pytest.raises(ReconfigurationError, match="deployment .*not found"):
        backend.apply(Placement(("n1", "n2", "n4"), 20.0))
    assert fake_kube.writes() == []
    assert labelled(fake_kube) == {"n1", "n2"} and executor_nodes(fake_driver) == {"n1", "n2"}


def test_recommend_only_decides_exports_and_changes_nothing(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    backend = make_backend(fake_kube, fake_driver)
    exporter = ControllerMetrics()
    loop = ControlLoop(backend, ScriptedPolicy([3]), LMAP,
                       ControllerConfig(warmup_s=0, control_period_s=0.3, recommend_only=True),
                       on_step=exporter.on_step)
    record = loop.step()
    assert not record.applied and record.reconfiguration.added == ("n4",)
    assert fake_kube.writes() == []
    assert [c for c in fake_driver.calls if c[0] != "GET"] == []
    assert labelled(fake_kube) == {"n1", "n2"} and executor_nodes(fake_driver) == {"n1", "n2"}
    text = exporter.text()
    assert "gesscale_recommended_replicas 3.0" in text
    assert "gesscale_replicas 2.0" in text
    assert 'gesscale_recommended_node{node="n4"} 1.0' in text
    assert 'gesscale_decisions_total{applied="false",kind="up"} 1.0' in text


def test_observation_summarises_the_batches_of_the_period(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_driver.observations[:] = [observation(10, backlog=500), observation(11, rows=900, backlog=400),
                                   observation(13, rows=1100, backlog=300)]
    obs = make_backend(fake_kube, fake_driver).observe()
    # Batches 11 and 13 were sampled, 12 was not: 3 batches of 1000 rows on average were processed.
    assert obs.throughput * obs.period_s == pytest.approx(3000)
    assert obs.backlog == 300 and obs.backlog_growth == -200
    assert obs.input_rate * obs.period_s == pytest.approx(2800)
    assert obs.replicas == ("n1", "n2") and obs.nd_max_ms == 20


def test_restart_that_cannot_place_restores_the_previous_placement(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.put(NODES, None, {**fake_kube.objects(NODES)["n4"], "spec": {"unschedulable": True}})
    backend = make_backend(fake_kube, fake_driver, strategy="restart", ready_timeout_s=0.5)
    with pytest.raises(ReconfigurationError, match="previous placement restored"):
        backend.apply(Placement(("n1", "n2", "n4"), 20.0))
    assert labelled(fake_kube) == {"n1", "n2"}
    deployment = fake_kube.objects(DEPLOYMENTS)[f"{APP}-driver"]["spec"]
    assert deployment["replicas"] == 1
    assert deployment["template"]["metadata"]["annotations"] == {"gesscale.io/executors": "2"}
    assert eventually(lambda: executor_nodes(fake_driver) == {"n1", "n2"})


def test_no_observation_for_a_whole_period_is_reported_not_guessed(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    backend = make_backend(fake_kube, fake_driver)
    fake_driver.close()  # the driver is gone (restarting, crashed): every sample fails
    with pytest.raises(ObservationUnavailable, match="no decision this period"):
        backend.observe()
