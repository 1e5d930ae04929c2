"""Who may do what on the cluster: the controller's and the driver's accounts, least privilege (pure).

Two namespaces, not one, because RBAC alone cannot keep a pod creator from becoming another account of its
namespace: whoever may create pods in a namespace may run a pod under any ServiceAccount of that namespace
(there is no RBAC verb guarding `serviceAccountName`) and may mount any Secret of it. Spark's driver must create
pods (its executors), so the controller's account, which may label nodes cluster-wide, lives in a namespace of
its own (`CONTROLLER_NAMESPACE`) where the driver can create nothing and read nothing.

The controller (exactly the verbs and resources `gesscale.k8s.api` uses; tests/k8s/test_rbac_used.py checks
the rules against its requests, tests/k8s/test_rbac_static.py evaluates them):
- nodes: list, patch — ClusterRole: nodes are not namespaced, so only a ClusterRole can grant them. `list`
  cannot be limited by name; `patch` can (resourceNames = the candidate nodes, when they are known) and
  cannot be limited to one label: a node patch right writes the whole node object;
- pods: list — in the job's namespace, to find this application's driver and executor pods and their nodes;
- events: create — one Event per reconfiguration (create cannot be limited by name: the name is new);
- deployments (apps): get, patch of the driver Deployment only (resourceNames) — the `restart` strategy
  scales it to 0 and back; a live-only controller drops this rule (`restart=False`).
The backend lists (with selectors) and never reads single nodes or pods, nor watches (it polls).

The driver (what Spark's driver does on Kubernetes in client mode, in its own namespace only): its executor
pods (create, get, list, watch, delete, deletecollection), the executor ConfigMap Spark creates and deletes,
and a list of volume claims (Spark >= 3.4 looks for claims it may reuse; a refusal is only logged). No
services (client mode creates none), no secrets, no patch, nothing outside its namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gesscale.errors import UserError

CONTROLLER_NAMESPACE = "gesscale-system"
CONTROLLER_NODE_VERBS = ("list", "patch")
CONTROLLER_POD_VERBS = ("list",)
CONTROLLER_EVENT_VERBS = ("create",)
CONTROLLER_DEPLOYMENT_VERBS = ("get", "patch")
DRIVER_POD_VERBS = ("create", "get", "list", "watch", "delete", "deletecollection")
DRIVER_CONFIGMAP_VERBS = ("create", "get", "list", "delete", "deletecollection")
DRIVER_PVC_VERBS = ("list",)
RBAC_GROUP = "rbac.authorization.k8s.io"


def _binding(kind: str, name: str, namespace: str | None, role_kind: str, sa: str, sa_ns: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}],
    }


def controller_rbac(
    namespace: str,
    service_account: str,
    restart: bool = True,
    *,
    app: str = "gesscale-job",
    controller_namespace: str = CONTROLLER_NAMESPACE,
    nodes: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The controller's Namespace and ServiceAccount (in `controller_namespace`), a ClusterRole(+Binding) for
    nodes, and a Role(+Binding) in the job's `namespace` for pods, events and the driver Deployment.

    `nodes`: when given, node patches are limited to these names (the candidates of the latency map);
    empty: any node may be labelled.
    """
    if controller_namespace == namespace:
        raise UserError(
            f"the controller's namespace must differ from the job's ({namespace!r}): whoever creates pods in a "
            "namespace (Spark's driver does) can run them under any service account of that namespace"
        )
    ns_rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": list(CONTROLLER_POD_VERBS)},
        {"apiGroups": [""], "resources": ["events"], "verbs": list(CONTROLLER_EVENT_VERBS)},
    ]
    if restart:
        ns_rules.append({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [f"{app}-driver"],
                         "verbs": list(CONTROLLER_DEPLOYMENT_VERBS)})
    node_rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": list(CONTROLLER_NODE_VERBS)}]
    if nodes:  # list cannot be limited by name, patch can: two rules
        node_rules = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                      {"apiGroups": [""], "resources": ["nodes"], "resourceNames": sorted(set(nodes)),
                       "verbs": ["patch"]}]
    nodes_role = f"{service_account}-nodes"
    role = service_account  # in the job's namespace, named after the account it serves
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": controller_namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": service_account, "namespace": controller_namespace}},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": nodes_role},
         "rules": node_rules},
        _binding("ClusterRoleBinding", nodes_role, None, "ClusterRole", service_account, controller_namespace),
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": {"name": role, "namespace": namespace},
         "rules": ns_rules},
        _binding("RoleBinding", role, namespace, "Role", service_account, controller_namespace),
    ]


def driver_rbac(namespace: str, service_account: str) -> list[dict[str, Any]]:
    """The driver's ServiceAccount, Role and RoleBinding, all in the job's `namespace`."""
    meta: dict[str, Any] = {"name": service_account, "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "Role",
            "metadata": dict(meta),
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": list(DRIVER_POD_VERBS)},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": list(DRIVER_CONFIGMAP_VERBS)},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": list(DRIVER_PVC_VERBS)},
            ],
        },
        _binding("RoleBinding", service_account, namespace, "Role", service_account, namespace),
    ]
