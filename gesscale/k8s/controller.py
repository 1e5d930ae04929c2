"""The controller's own Deployment on the cluster (pure): `gesscale k8s run` in a pod under its ServiceAccount.

The ServiceAccount and its least-privilege rules come from `gesscale.k8s.rbac` (rbac.yaml); this module only
adds the workload that uses them. The controller reaches the driver's scaling hook through the driver's
Service (`SubmitSpec.hook_url`, in-cluster DNS) and the API server with the in-cluster configuration (the
service account token Kubernetes mounts). One replica and `Recreate`: two controllers would fight over the
pool label. It runs in its own namespace (`SubmitSpec.controller_namespace`: the driver may create pods in the
job's namespace, so the controller's account must not live there; `gesscale.k8s.rbac`), as a non-root user
with a read-only root file system, no capability and the default seccomp profile; the policy's learned state
is kept in an emptyDir (it survives a container restart, not a pod rescheduling: the model then learns again).
The hook token comes from a Secret of the same name in the controller's namespace (a pod reads Secrets of its
own namespace only).
"""

from __future__ import annotations

from typing import Any

from gesscale.k8s.names import APP_LABEL, ROLE_LABEL
from gesscale.k8s.security import CONTROLLER_UID, container_security, pod_security
from gesscale.k8s.spec import SubmitSpec

__all__ = ["CONTROLLER_UID", "METRICS_PORT", "STATE_DIR", "controller_args", "controller_deployment"]

STATE_DIR = "/var/lib/gesscale"
METRICS_PORT = 9108  # the controller's gesscale_* metrics (Prometheus text, docs/metrics.md), `--metrics-port`


def controller_args(spec: SubmitSpec) -> list[str]:
    """The `gesscale` arguments of the controller container (the image's entrypoint is `gesscale`)."""
    return [
        "k8s", "run",
        "--hook-url", spec.hook_url,
        "--app", spec.app,
        "--namespace", spec.namespace,
        "--strategy", spec.controller_strategy,
        "--metrics-port", str(METRICS_PORT),
        "--state", f"{STATE_DIR}/state.json",
    ]  # fmt: skip


def controller_deployment(spec: SubmitSpec) -> dict[str, Any]:
    """The controller's Deployment: one pod, its ServiceAccount, the hook token from the job's Secret."""
    labels = {APP_LABEL: spec.app, ROLE_LABEL: "controller"}
    container: dict[str, Any] = {
        "name": "controller",
        "image": spec.controller_image,
        "args": controller_args(spec),
        "env": [
            {"name": "GESSCALE_JOB_TOKEN", "valueFrom": {"secretKeyRef": {"name": spec.token_secret, "key": "token"}}},
            {"name": "MPLCONFIGDIR", "value": "/tmp"},  # matplotlib (imported by reports) wants a writable home
        ],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
        "resources": {"requests": {"cpu": "50m", "memory": "192Mi"}, "limits": {"memory": "384Mi"}},
        "securityContext": container_security(CONTROLLER_UID),
        "volumeMounts": [
            {"name": "state", "mountPath": STATE_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{spec.app}-controller", "namespace": spec.controller_namespace,
                     "labels": {APP_LABEL: spec.app}},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},  # never two controllers moving the pool label at once
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "serviceAccountName": spec.controller_service_account,
                    "securityContext": pod_security(CONTROLLER_UID),
                    "containers": [container],
                    "volumes": [{"name": "state", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }
