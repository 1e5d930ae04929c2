"""API and hook errors during a live reconfiguration: retried where safe, otherwise a clear error and the
cluster left as it was (labels, executors, target)."""

from __future__ import annotations

import pytest

from gesscale.k8s.backend import ReconfigurationError
from gesscale.observation import Placement
from tests.fixtures.k8s import NODES, Fault
from tests.k8s.helpers import LMAP, build_cluster, executor_nodes, labelled, make_backend

UP = Placement(("n1", "n2", "n4"), LMAP.nd_max(("n1", "n2", "n4")))
DOWN = Placement(("n2",), 0.0)


def _patches(api, node):
    return [r for r in api.writes() if r.method == "PATCH" and r.path == f"/api/v1/nodes/{node}"]


def _assert_unchanged(api, driver):
    assert labelled(api) == {"n1", "n2"}
    assert executor_nodes(driver) == {"n1", "n2"}


def test_forbidden_is_not_retried_and_changes_nothing(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.fault(Fault("PATCH", "/api/v1/nodes/n4", status=403))
    backend = make_backend(fake_kube, fake_driver)
    with pytest.raises(ReconfigurationError, match="forbidden.*rbac"):
        backend.apply(UP)
    assert len(_patches(fake_kube, "n4")) == 1  # sent once
    assert fake_driver.hook_calls() == []  # the target was never raised
    _assert_unchanged(fake_kube, fake_driver)
    assert backend.current().nodes == ("n1", "n2")


def test_conflict_is_retried_and_the_scale_up_completes(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.fault(Fault("PATCH", "/api/v1/nodes/n4", status=409))
    backend = make_backend(fake_kube, fake_driver)
    assert backend.apply(UP) == 0.0
    assert [r.answered for r in _patches(fake_kube, "n4")] == [409, 200]
    assert labelled(fake_kube) == {"n1", "n2", "n4"}
    assert executor_nodes(fake_driver) == {"n1", "n2", "n4"}


def test_conflict_that_persists_ends_in_a_clear_error(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.fault(Fault("PATCH", "/api/v1/nodes/n4", status=409, times=10))
    backend = make_backend(fake_kube, fake_driver, attempts=3)
    with pytest.raises(ReconfigurationError, match="conflict"):
        backend.apply(UP)
    assert len(_patches(fake_kube, "n4")) == 3
    _assert_unchanged(fake_kube, fake_driver)


def test_node_gone_before_labelling(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.delete(NODES, None, "n4")  # the node left the cluster after the controller chose it
    backend = make_backend(fake_kube, fake_driver)
    with pytest.raises(ReconfigurationError, match="node n4.*not found"):
        backend.apply(UP)
    assert len(_patches(fake_kube, "n4")) == 1  # 404 is not retried
    assert fake_driver.hook_calls() == []
    _assert_unchanged(fake_kube, fake_driver)


def test_node_gone_after_its_executor_left_counts_as_unlabelled(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.fault(Fault("PATCH", "/api/v1/nodes/n1", status=404))
    backend = make_backend(fake_kube, fake_driver)
    assert backend.apply(DOWN) == 0.0
    assert executor_nodes(fake_driver) == {"n2"}
    assert backend.current().nodes == ("n2",)


def test_lost_answer_is_retried_and_lands_once(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    # The first patch is applied but answered after the client's timeout; the retry re-applies the same patch.
    fake_kube.fault(Fault("PATCH", "/api/v1/nodes/n4", delay_s=1.5, apply=True))
    backend = make_backend(fake_kube, fake_driver, timeout_s=0.5)
    backend.apply(UP)
    assert len(_patches(fake_kube, "n4")) == 2
    assert labelled(fake_kube) == {"n1", "n2", "n4"}
    assert executor_nodes(fake_driver) == {"n1", "n2", "n4"}


def test_api_that_never_answers_ends_in_a_clear_error(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.fault(Fault("PATCH", "/api/v1/nodes/n4", delay_s=1.0, apply=False, times=2))
    backend = make_backend(fake_kube, fake_driver, timeout_s=0.3, attempts=2)
    with pytest.raises(ReconfigurationError, match="no answer"):
        backend.apply(UP)
    assert fake_driver.hook_calls() == []
    _assert_unchanged(fake_kube, fake_driver)


def test_hook_refusal_undoes_the_label(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    backend = make_backend(fake_kube, fake_driver)
    backend.hook.token = "wrong"
    with pytest.raises(ReconfigurationError, match="401"):
        backend.apply(UP)
    writes = [(r.method, r.path, r.body["metadata"]["labels"]) for r in fake_kube.writes()]
    assert writes == [("PATCH", "/api/v1/nodes/n4", {"gesscale.io/pool": "taxi"}),
                      ("PATCH", "/api/v1/nodes/n4", {"gesscale.io/pool": None})]
    _assert_unchanged(fake_kube, fake_driver)


def test_executor_that_never_runs_is_rolled_back(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.put(NODES, None, {**fake_kube.objects(NODES)["n4"], "spec": {"unschedulable": True}})
    backend = make_backend(fake_kube, fake_driver, ready_timeout_s=0.5)
    with pytest.raises(ReconfigurationError, match="no running executor on n4"):
        backend.apply(UP)
    assert [b for _, _, b in fake_driver.hook_calls()] == [{"target": 3, "wait_s": 0.0}, {"target": 2, "wait_s": 0.0}]
    assert fake_driver.executor_pods().keys() == {"taxi-exec-1", "taxi-exec-2"}  # the Pending pod was withdrawn
    _assert_unchanged(fake_kube, fake_driver)


def test_scale_down_refused_by_the_driver_keeps_the_labels(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    backend = make_backend(fake_kube, fake_driver)
    backend.hook.token = "wrong"
    with pytest.raises(ReconfigurationError, match="refused by the driver"):
        backend.apply(DOWN)
    assert fake_kube.writes() == []
    _assert_unchanged(fake_kube, fake_driver)


def test_executor_pod_that_never_goes_keeps_its_label(fake_kube, fake_driver, monkeypatch):
    build_cluster(fake_kube, fake_driver)
    monkeypatch.setattr(fake_driver, "kill", lambda ids: list(ids))  # Spark accepts the kill, the pod stays
    backend = make_backend(fake_kube, fake_driver, ready_timeout_s=0.5)
    with pytest.raises(ReconfigurationError, match="executors on n1 still there"):
        backend.apply(DOWN)
    _assert_unchanged(fake_kube, fake_driver)
