"""Pod hardening and network policies of the generated manifests (pure: dicts out).

Every pod we generate runs as the unprivileged user of its image (Dockerfile: 185 for the job image, 10001
for the controller), cannot gain privileges, has no Linux capability, runs under the runtime's default
seccomp profile and has a read-only root file system; what must be writable is an emptyDir (`/tmp`: Spark's
local dirs, the JVM's and Python's scratch) or the checkpoint volume.

Network: only the controller's pods reach the driver's scaling hook, only this application's executors reach
the driver's other ports (Spark's RPC and block manager ports are random unless pinned), and executors accept
only this application's driver and executors. `kubectl port-forward` enters the pod's network namespace
through the kubelet and is not subject to these policies (the laptop path of docs/kubernetes.md).
"""

from __future__ import annotations

from typing import Any

from gesscale.k8s.names import APP_LABEL, ROLE_LABEL

JOB_UID = 185  # the user of the job image (Dockerfile, target `job`)
CONTROLLER_UID = 10001  # the user of the controller image (Dockerfile, target `controller`)
SCRATCH_DIR = "/tmp"
SCRATCH_VOLUME = "tmp"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace (>= 1.22)


def pod_security(uid: int, fs_group: int | None = None) -> dict[str, Any]:
    """Pod-level securityContext: non-root user `uid`, the runtime's default seccomp profile."""
    ctx: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": uid, "seccompProfile": {"type": "RuntimeDefault"}}
    if fs_group is not None:
        ctx["fsGroup"] = fs_group  # volumes that support ownership (the checkpoint claim) become writable
        ctx["fsGroupChangePolicy"] = "OnRootMismatch"
    return ctx


def container_security(uid: int) -> dict[str, Any]:
    """Container-level securityContext: no privilege escalation, no capability, read-only root file system."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def scratch_volume() -> dict[str, Any]:
    """The emptyDir behind `/tmp` (a read-only root leaves nothing else writable)."""
    return {"name": SCRATCH_VOLUME, "emptyDir": {}}


def scratch_mount() -> dict[str, Any]:
    """The mount of `scratch_volume` at `/tmp`."""
    return {"name": SCRATCH_VOLUME, "mountPath": SCRATCH_DIR}


def _policy(name: str, namespace: str, selector: dict[str, str], ingress: list[dict[str, Any]],
            app: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": {APP_LABEL: app}},
        "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress"], "ingress": ingress},
    }


def job_network_policies(app: str, namespace: str, controller_namespace: str, hook_port: int) -> list[dict[str, Any]]:
    """Ingress of the driver (hook port: the controller's pods; any port: this app's executors) and of the
    executors (this app's driver and executors only). Egress is left open (API server, Kafka, DNS)."""
    driver = {APP_LABEL: app, ROLE_LABEL: "driver"}
    executor = {APP_LABEL: app, ROLE_LABEL: "executor"}
    controller_pods = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: controller_namespace}},
        "podSelector": {"matchLabels": {APP_LABEL: app, ROLE_LABEL: "controller"}},
    }
    return [
        _policy(f"{app}-driver", namespace, driver, [
            {"from": [controller_pods], "ports": [{"protocol": "TCP", "port": hook_port}]},
            {"from": [{"podSelector": {"matchLabels": executor}}]},
        ], app),
        _policy(f"{app}-executors", namespace, executor, [
            {"from": [{"podSelector": {"matchLabels": driver}}, {"podSelector": {"matchLabels": executor}}]},
        ], app),
    ]


def controller_network_policy(app: str, controller_namespace: str, metrics_port: int) -> dict[str, Any]:
    """Ingress of the controller: its metrics port only (a Prometheus scraper); nothing else listens."""
    selector = {APP_LABEL: app, ROLE_LABEL: "controller"}
    return _policy(f"{app}-controller", controller_namespace, selector,
                   [{"ports": [{"protocol": "TCP", "port": metrics_port}]}], app)
