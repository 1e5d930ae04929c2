"""Every generated manifest against the Kubernetes OpenAPI schema of the k3s release the playbooks install.

kubernetes-validate ships the JSON schemas derived from each Kubernetes release's OpenAPI document inside its
wheel, so this runs offline (a test below blocks sockets to prove it). Strict mode refuses fields the schema
does not have. The version is read from the k3s role's default (`k3s_version: v1.31.4+k3s1` -> 1.31.0), so a
k3s upgrade moves the schema with it.
"""

from __future__ import annotations

import copy
import re
import socket
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gesscale.k8s.manifests import bundle
from gesscale.k8s.spec import SubmitSpec
from tests.fixtures.paths import ROOT


def _k8s_version() -> str:
    defaults = yaml.safe_load((ROOT / "playbooks/roles/k3s/defaults/main.yml").read_text())
    m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+\+k3s\d+", defaults["k3s_version"])
    assert m, defaults["k3s_version"]
    return f"{m.group(1)}.{m.group(2)}.0"


VERSION = _k8s_version()
SPECS = {
    "defaults": SubmitSpec(),
    "other": SubmitSpec(app="taxi", namespace="fog", executors=0, storage_class="local-path",
                        driver_node_selector={"kubernetes.io/hostname": "pi01"}, controller_strategy="restart"),
}


def _documents(spec: SubmitSpec) -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for name, text in bundle(spec).items():
        if name.endswith(".yaml"):
            docs += [(f"{name}[{i}]", d) for i, d in enumerate(yaml.safe_load_all(text)) if d]
    return docs


def _committed() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted((ROOT / "manifests").glob("*.yaml")):
        docs += [(f"{path.name}[{i}]", d) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d]
    return docs


@pytest.mark.parametrize("which", ["defaults", "other", "committed"])
def test_every_document_fits_the_schema_of_the_targeted_k3s(which: str) -> None:
    docs = _committed() if which == "committed" else _documents(SPECS[which])
    kinds = {d["kind"] for _, d in docs}
    assert {"Deployment", "Service", "ServiceAccount", "ClusterRole", "Role", "Pod"} <= kinds, kinds
    for where, doc in docs:
        try:
            kubernetes_validate.validate(doc, VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{where} ({doc['kind']}): {err.message} at {list(err.path)}")


def test_the_controller_deployment_is_among_them_and_uses_its_service_account() -> None:
    docs = dict(_documents(SubmitSpec()))
    deployment = docs["controller.yaml[0]"]
    assert deployment["kind"] == "Deployment"
    pod = deployment["spec"]["template"]["spec"]
    rbac = dict(_documents(SubmitSpec()))
    account = rbac["rbac.yaml[1]"]
    assert account["kind"] == "ServiceAccount"
    assert pod["serviceAccountName"] == account["metadata"]["name"] == "gesscale-controller"
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"] == "gesscale-system"
    args = pod["containers"][0]["args"]
    assert args[:4] == ["k8s", "run", "--hook-url", "http://gesscale-job-driver.spark.svc:4041"]


@pytest.mark.parametrize(("path", "value"), [
    (("spec", "template", "spec", "containers", 0, "imagePullPolicyy"), "Always"),   # unknown field
    (("spec", "replicas"), "one"),                                                  # wrong type
    (("spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"), "api"),
])
def test_a_broken_document_is_refused(path: tuple[Any, ...], value: Any) -> None:
    doc = copy.deepcopy(dict(_documents(SubmitSpec()))["controller.yaml[0]"])
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_validation_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("kubernetes-validate tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for _, doc in _documents(SubmitSpec()):
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_controller_reaches_the_hook_through_the_driver_s_service() -> None:
    spec = SubmitSpec(app="taxi", namespace="fog", http_port=4555)
    docs = [d for _, d in _documents(spec)]
    service = next(d for d in docs if d["kind"] == "Service")
    driver = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "taxi-driver")
    controller = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "taxi-controller")
    pod_labels = driver["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()  # the Service selects the driver pod
    assert {"name": "api", "port": 4555, "targetPort": 4555} in service["spec"]["ports"]
    ports = driver["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert {"name": "api", "containerPort": 4555} in ports
    args = controller["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--hook-url") + 1] == f"http://{service['metadata']['name']}.fog.svc:4555"
    assert controller["spec"]["template"]["metadata"]["labels"] != pod_labels  # not selected by the Service
