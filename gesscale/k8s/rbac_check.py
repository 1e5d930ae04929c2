"""A static RBAC evaluator: may this ServiceAccount do this request, given these RBAC documents? (pure)

This is not a Kubernetes API server: it evaluates the Role, ClusterRole, RoleBinding and ClusterRoleBinding
documents it is given, by the rules Kubernetes documents for its RBAC authorizer
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/), and nothing else — not the cluster's built-in
bindings (system:basic-user, system:discovery, ...), not other authorizers (Node, webhooks), not admission.
What it follows:
- permissions are purely additive: a request is allowed when any rule reachable through any binding of the
  subject matches it; there are no deny rules;
- a binding names its subjects as ServiceAccount (name + namespace), User or Group; a ServiceAccount is also
  the user `system:serviceaccount:<ns>:<name>` and a member of the groups `system:serviceaccounts`,
  `system:serviceaccounts:<ns>` and `system:authenticated`;
- a ClusterRoleBinding grants its ClusterRole everywhere (every namespace and cluster-scoped resources); a
  RoleBinding grants its Role, or a ClusterRole it refers to, only inside the RoleBinding's own namespace and
  never on cluster-scoped resources; a RoleBinding cannot refer to a Role of another namespace;
- a rule matches when the verb, the API group and the resource each match (`*` matches any); a request for a
  subresource (`pods/exec`) is matched only by `pods/exec`, `*/exec` or `*`, never by `pods`;
- `resourceNames`, when present, limit the rule to requests naming one of them: a request without a name
  (list, watch of a collection, create, deletecollection) never matches such a rule.
Beyond single requests, `can_act_as` and `can_read_secrets` follow the documented escalation paths: whoever
can create pods (or a workload that makes pods) in a namespace can run them under any ServiceAccount of that
namespace and mount any of its Secrets; `impersonate` and creating a ServiceAccount's token act as it directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

WILDCARD = "*"
# Kinds whose creation makes pods (the pod runs with whatever serviceAccountName its template names).
POD_MAKERS = (
    ("", "pods"), ("", "replicationcontrollers"), ("apps", "deployments"), ("apps", "replicasets"),
    ("apps", "statefulsets"), ("apps", "daemonsets"), ("batch", "jobs"), ("batch", "cronjobs"),
)  # fmt: skip
# Verbs that change a pod-making object's template (a patched Deployment runs its new template).
WRITE_VERBS = ("create", "update", "patch")


@dataclass(frozen=True)
class Request:
    """One API request: verb, API group ('' = core), resource, optional subresource, name and namespace.

    `namespace=None` is a cluster-scoped resource (nodes) or a request across all namespaces.
    """

    verb: str
    resource: str
    group: str = ""
    namespace: str | None = None
    name: str = ""
    subresource: str = ""


@dataclass(frozen=True)
class ServiceAccount:
    """A ServiceAccount, with the user name and groups Kubernetes authenticates its token as."""

    name: str
    namespace: str

    @property
    def user(self) -> str:
        """`system:serviceaccount:<namespace>:<name>`."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> frozenset[str]:
        """The groups every ServiceAccount token carries."""
        return frozenset({"system:serviceaccounts", f"system:serviceaccounts:{self.namespace}",
                          "system:authenticated"})


def _matches(values: Iterable[str], wanted: str) -> bool:
    values = list(values or [])
    return WILDCARD in values or wanted in values


def _resource_matches(resources: Iterable[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for rule_resource in resources or []:
        if rule_resource in (WILDCARD, combined):
            return True
        if subresource and rule_resource == f"*/{subresource}":
            return True
    return False


def rule_allows(rule: dict[str, Any], req: Request) -> bool:
    """Whether one PolicyRule matches a resource request (verb, group, resource/subresource, resourceNames)."""
    if not _matches(rule.get("verbs") or [], req.verb):
        return False
    if not _matches(rule.get("apiGroups") or [], req.group):
        return False
    if not _resource_matches(rule.get("resources") or [], req.resource, req.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(req.name) and req.name in names)


def _subject_is(subject: dict[str, Any], sa: ServiceAccount, binding_ns: str | None) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        # a ServiceAccount subject without namespace means the binding's namespace (RoleBinding only)
        return subject.get("name") == sa.name and (subject.get("namespace") or binding_ns) == sa.namespace
    if kind == "User":
        return subject.get("name") == sa.user
    if kind == "Group":
        return subject.get("name") in sa.groups
    return False


class Rbac:
    """The RBAC documents of a cluster (any other kinds are ignored), queried per ServiceAccount."""

    def __init__(self, docs: Iterable[dict[str, Any]]) -> None:
        self.cluster_roles: dict[str, list[dict[str, Any]]] = {}
        self.roles: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.bindings: list[dict[str, Any]] = []
        self.accounts: set[ServiceAccount] = set()
        for doc in docs:
            if not doc:
                continue
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            if kind == "ClusterRole":
                self.cluster_roles[meta["name"]] = list(doc.get("rules") or [])
            elif kind == "Role":
                self.roles[(meta["namespace"], meta["name"])] = list(doc.get("rules") or [])
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                self.bindings.append(doc)
            elif kind == "ServiceAccount":
                self.accounts.add(ServiceAccount(meta["name"], meta["namespace"]))

    def _grants(self, sa: ServiceAccount) -> list[tuple[str | None, list[dict[str, Any]]]]:
        """(namespace the rules apply in, None = everywhere; rules) for every binding naming `sa`."""
        out: list[tuple[str | None, list[dict[str, Any]]]] = []
        for b in self.bindings:
            meta, ref = b.get("metadata") or {}, b.get("roleRef") or {}
            ns = meta.get("namespace") if b["kind"] == "RoleBinding" else None
            if not any(_subject_is(s, sa, ns) for s in b.get("subjects") or []):
                continue
            if ref.get("kind") == "ClusterRole":
                rules = self.cluster_roles.get(ref.get("name", ""), [])
            elif ref.get("kind") == "Role" and ns is not None:
                rules = self.roles.get((ns, ref.get("name", "")), [])  # a Role of the binding's namespace only
            else:
                rules = []
            out.append((ns, rules))
        return out

    def allowed(self, sa: ServiceAccount, req: Request) -> bool:
        """Whether `sa` may make `req` under these documents (the union of every rule bound to it)."""
        for ns, rules in self._grants(sa):
            if ns is not None and req.namespace != ns:
                continue  # a RoleBinding grants inside its namespace only (never cluster-scoped resources)
            if any(rule_allows(rule, req) for rule in rules):
                return True
        return False

    def allowed_on_some_object(self, sa: ServiceAccount, req: Request) -> bool:
        """Whether `req` is allowed for at least one object name: any name a rule lists, or any other."""
        names = {WILDCARD_NAME}
        for rules in [*self.cluster_roles.values(), *self.roles.values()]:
            for rule in rules:
                names.update(rule.get("resourceNames") or [])
        return any(self.allowed(sa, replace(req, name=n)) for n in sorted(names))

    def can_run_pods_in(self, sa: ServiceAccount, namespace: str) -> bool:
        """Whether `sa` can get a pod of its choosing running in `namespace`: create a pod or a workload,
        or rewrite an existing workload's pod template (update/patch)."""
        for group, resource in POD_MAKERS:
            if self.allowed(sa, Request("create", resource, group, namespace)):
                return True
            if resource != "pods" and any(self.allowed_on_some_object(sa, Request(v, resource, group, namespace))
                                          for v in ("update", "patch")):
                return True
        return False

    def can_act_as(self, sa: ServiceAccount, other: ServiceAccount) -> bool:
        """Whether `sa` can obtain `other`'s rights: impersonation, a token for it, or a pod running as it."""
        if sa == other:
            return True
        if self.allowed(sa, Request("impersonate", "serviceaccounts", "", other.namespace, other.name)):
            return True
        if self.allowed(sa, Request("impersonate", "users", "", None, other.user)):
            return True
        if self.allowed(sa, Request("create", "serviceaccounts", "", other.namespace, other.name, "token")):
            return True
        # a Secret holding a token of the account (legacy token Secrets) is readable, or a pod can run as it
        return self.can_read_secrets(sa, other.namespace)

    def can_read_secrets(self, sa: ServiceAccount, namespace: str) -> bool:
        """Whether `sa` can read Secrets of `namespace`: get/list/watch them, or mount them in a pod it runs."""
        if any(self.allowed(sa, Request(verb, "secrets", "", namespace)) for verb in ("list", "watch")):
            return True
        if self.allowed_on_some_object(sa, Request("get", "secrets", "", namespace)):
            return True
        return self.can_run_pods_in(sa, namespace)


# A name no rule lists: a rule limited by resourceNames does not match it, an unlimited rule does. "Any
# object" questions (can it patch *some* Deployment it does not own?) use it.
WILDCARD_NAME = "\x00any-object-not-named-in-a-rule"
