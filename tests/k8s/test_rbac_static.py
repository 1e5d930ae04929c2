"""The RBAC we generate and commit, evaluated statically (gesscale.k8s.rbac_check; no API server here): the
driver's account cannot become the controller's nor read its Secrets, and the controller can do exactly what
its requests need."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gesscale.k8s.manifests import bundle
from gesscale.k8s.rbac_check import Rbac, Request, ServiceAccount
from gesscale.k8s.spec import SubmitSpec

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = SubmitSpec()
CUSTOM = SubmitSpec(app="taxi", namespace="fog", controller_namespace="ops", driver_service_account="drv",
                    controller_service_account="ctl")


def _committed() -> list[dict]:
    return [d for p in sorted((ROOT / "manifests").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def _generated(spec: SubmitSpec) -> list[dict]:
    return [d for name, text in bundle(spec).items() if name.endswith(".yaml")
            for d in yaml.safe_load_all(text) if d]


CASES = [pytest.param(_committed, DEFAULTS, id="manifests/"),
         pytest.param(lambda: _generated(DEFAULTS), DEFAULTS, id="generated-defaults"),
         pytest.param(lambda: _generated(CUSTOM), CUSTOM, id="generated-custom")]


def _accounts(spec: SubmitSpec) -> tuple[ServiceAccount, ServiceAccount]:
    return (ServiceAccount(spec.driver_service_account, spec.namespace),
            ServiceAccount(spec.controller_service_account, spec.controller_namespace))


@pytest.mark.parametrize(("docs", "spec"), CASES)
def test_the_driver_cannot_act_as_the_controller(docs, spec):
    rbac = Rbac(docs())
    driver, controller = _accounts(spec)
    assert {driver, controller} <= rbac.accounts
    ctl_ns, job_ns = spec.controller_namespace, spec.namespace
    assert ctl_ns != job_ns
    refused = [
        Request("get", "secrets", namespace=ctl_ns, name=spec.token_secret),
        Request("list", "secrets", namespace=ctl_ns),
        Request("watch", "secrets", namespace=ctl_ns),
        Request("get", "secrets", namespace=job_ns, name=spec.token_secret),  # not by the API (its env has it)
        Request("list", "secrets", namespace=job_ns),
        Request("create", "pods", namespace=ctl_ns),
        Request("create", "deployments", "apps", namespace=ctl_ns),
        Request("patch", "deployments", "apps", namespace=ctl_ns, name=f"{spec.app}-controller"),
        Request("patch", "nodes", name="pi04"),
        Request("update", "nodes", name="pi04"),
        Request("list", "nodes"),
        Request("impersonate", "serviceaccounts", namespace=ctl_ns, name=controller.name),
        Request("impersonate", "users", name=controller.user),
        Request("impersonate", "groups", name="system:masters"),
        Request("create", "serviceaccounts", namespace=ctl_ns, name=controller.name, subresource="token"),
        Request("create", "serviceaccounts", namespace=job_ns, name=driver.name, subresource="token"),
        Request("create", "serviceaccounts", namespace=job_ns),
        Request("create", "rolebindings", "rbac.authorization.k8s.io", namespace=job_ns),
        Request("bind", "clusterroles", "rbac.authorization.k8s.io", name=f"{controller.name}-nodes"),
        Request("escalate", "roles", "rbac.authorization.k8s.io", namespace=job_ns, name=driver.name),
        Request("create", "pods", namespace=job_ns, name="x", subresource="exec"),
        Request("patch", "pods", namespace=job_ns, name="x"),
        Request("create", "services", namespace=job_ns),
        Request("create", "pods", namespace="kube-system"),
    ]
    allowed = [r for r in refused if rbac.allowed(driver, r)]
    assert allowed == []
    assert not rbac.can_act_as(driver, controller)
    assert not rbac.can_read_secrets(driver, ctl_ns)
    assert not rbac.can_run_pods_in(driver, ctl_ns) and not rbac.can_run_pods_in(driver, "kube-system")


@pytest.mark.parametrize(("docs", "spec"), CASES)
def test_the_driver_can_manage_its_executors_in_its_namespace(docs, spec):
    rbac = Rbac(docs())
    driver, _ = _accounts(spec)
    ns = spec.namespace
    for req in [Request("create", "pods", namespace=ns), Request("get", "pods", namespace=ns, name="e1"),
                Request("list", "pods", namespace=ns), Request("watch", "pods", namespace=ns),
                Request("delete", "pods", namespace=ns, name="e1"), Request("deletecollection", "pods", namespace=ns),
                Request("create", "configmaps", namespace=ns), Request("delete", "configmaps", namespace=ns, name="c"),
                Request("list", "persistentvolumeclaims", namespace=ns)]:
        assert rbac.allowed(driver, req), req
    # what it can reach through its pods: its own namespace's accounts and Secrets (inherent to creating pods)
    assert rbac.can_read_secrets(driver, ns)


@pytest.mark.parametrize(("docs", "spec"), CASES)
def test_the_controller_can_do_exactly_what_it_needs(docs, spec):
    rbac = Rbac(docs())
    driver, controller = _accounts(spec)
    ns, deployment = spec.namespace, f"{spec.app}-driver"
    needed = [
        Request("list", "nodes"),
        Request("patch", "nodes", name="pi04"),
        Request("list", "pods", namespace=ns),
        Request("create", "events", namespace=ns),
        Request("get", "deployments", "apps", namespace=ns, name=deployment),
        Request("patch", "deployments", "apps", namespace=ns, name=deployment),
    ]
    assert [r for r in needed if not rbac.allowed(controller, r)] == []
    refused = [
        Request("get", "nodes", name="pi04"),
        Request("delete", "nodes", name="pi04"),
        Request("update", "nodes", name="pi04"),
        Request("patch", "nodes", name="pi04", subresource="status"),
        Request("list", "pods"),  # across namespaces
        Request("list", "pods", namespace="kube-system"),
        Request("get", "pods", namespace=ns, name="p"),
        Request("watch", "pods", namespace=ns),
        Request("create", "pods", namespace=ns),
        Request("delete", "pods", namespace=ns, name="p"),
        Request("create", "pods", namespace=ns, name="p", subresource="exec"),
        Request("patch", "deployments", "apps", namespace=ns, name="another-app-driver"),
        Request("get", "deployments", "apps", namespace=ns, name="another-app-driver"),
        Request("list", "deployments", "apps", namespace=ns),
        Request("create", "deployments", "apps", namespace=ns),
        Request("patch", "deployments", "apps", namespace=spec.controller_namespace, name=deployment),
        Request("get", "secrets", namespace=ns, name=spec.token_secret),
        Request("list", "secrets", namespace=spec.controller_namespace),
        Request("create", "serviceaccounts", namespace=ns, name=driver.name, subresource="token"),
        Request("impersonate", "serviceaccounts", namespace=ns, name=driver.name),
        Request("delete", "events", namespace=ns, name="e"),
        Request("create", "events", namespace="kube-system"),
    ]
    assert [r for r in refused if rbac.allowed(controller, r)] == []
    assert not rbac.can_run_pods_in(controller, spec.controller_namespace)
    assert not rbac.can_run_pods_in(controller, "kube-system")


def test_only_the_restart_strategy_lets_the_controller_run_pods_in_the_jobs_namespace():
    """Patching the driver Deployment (restart strategy) rewrites a pod template: the controller is trusted
    with the job. A live-only controller (`gesscale k8s manifests --live-only`) has no such path."""
    driver, controller = _accounts(DEFAULTS)
    assert Rbac(_generated(DEFAULTS)).can_run_pods_in(controller, DEFAULTS.namespace)
    live = Rbac([d for name, text in bundle(DEFAULTS, restart=False).items() if name.endswith(".yaml")
                 for d in yaml.safe_load_all(text) if d])
    assert not live.can_run_pods_in(controller, DEFAULTS.namespace)
    assert not live.can_act_as(controller, driver)
    assert not live.allowed(controller, Request("patch", "deployments", "apps", namespace=DEFAULTS.namespace,
                                                name=f"{DEFAULTS.app}-driver"))


def test_named_nodes_limit_the_controllers_node_patches():
    from gesscale.k8s.rbac import controller_rbac

    rbac = Rbac(controller_rbac("spark", "gesscale-controller", nodes=["pi04", "pi05"]))
    controller = ServiceAccount("gesscale-controller", "gesscale-system")
    assert rbac.allowed(controller, Request("patch", "nodes", name="pi05"))
    assert not rbac.allowed(controller, Request("patch", "nodes", name="pi01"))
    assert rbac.allowed(controller, Request("list", "nodes"))


def test_the_executors_account_has_no_token_and_no_rights():
    (template,) = [d for d in _committed() if d["kind"] == "Pod"]
    assert template["spec"]["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in template["spec"]  # the namespace's `default`, bound to nothing of ours
    rbac = Rbac(_committed())
    default = ServiceAccount("default", DEFAULTS.namespace)
    assert not rbac.allowed(default, Request("list", "pods", namespace=DEFAULTS.namespace))
    assert not rbac.can_run_pods_in(default, DEFAULTS.namespace)
