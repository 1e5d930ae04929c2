"""The controller's RBAC: exactly the verbs and resources `gesscale.k8s.api` uses, nothing more (pure).

- nodes: list, patch — read readiness/cordon/taints/annotations, set and remove the pool label
  (cluster-wide: nodes are not namespaced, hence a ClusterRole);
- pods: list — find this application's driver and executor pods and the nodes they run on;
- events: create — one Event per reconfiguration on the driver Deployment;
- deployments (apps): get, patch — the `restart` strategy scales the driver Deployment to 0 and back with the
  new executor count; a live-only controller can drop this rule (`restart=False`).
The backend lists (with selectors) and never reads single objects, nor watches (it polls), so neither `get` on
nodes and pods nor `watch` is granted; tests/k8s/test_rbac_used.py checks the rules against its requests.
"""

from __future__ import annotations

from typing import Any

CONTROLLER_NODE_VERBS = ("list", "patch")
CONTROLLER_POD_VERBS = ("list",)
CONTROLLER_EVENT_VERBS = ("create",)
CONTROLLER_DEPLOYMENT_VERBS = ("get", "patch")


def controller_rbac(namespace: str, service_account: str, restart: bool = True) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole(+Binding) for nodes, Role(+Binding) for pods, events and the driver."""
    rbac = "rbac.authorization.k8s.io"
    ns_rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": list(CONTROLLER_POD_VERBS)},
        {"apiGroups": [""], "resources": ["events"], "verbs": list(CONTROLLER_EVENT_VERBS)},
    ]
    if restart:
        ns_rules.append({"apiGroups": ["apps"], "resources": ["deployments"],
                         "verbs": list(CONTROLLER_DEPLOYMENT_VERBS)})
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    nodes_role = f"{service_account}-nodes"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": service_account, "namespace": namespace}},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": nodes_role},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": list(CONTROLLER_NODE_VERBS)}],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": nodes_role},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": nodes_role},
            "subjects": subject,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": service_account, "namespace": namespace},
            "rules": ns_rules,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": service_account, "namespace": namespace},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": service_account},
            "subjects": subject,
        },
    ]
