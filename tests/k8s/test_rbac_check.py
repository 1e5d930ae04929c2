"""The static RBAC evaluator itself, on crafted documents: each Kubernetes rule it follows, allowed and refused."""

from __future__ import annotations

import pytest

from gesscale.k8s.rbac_check import Rbac, Request, ServiceAccount, rule_allows

ALICE = ServiceAccount("alice", "a")
BOB = ServiceAccount("bob", "b")
RG = "rbac.authorization.k8s.io/v1"


def role(name, ns, *rules):
    return {"apiVersion": RG, "kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": list(rules)}


def cluster_role(name, *rules):
    return {"apiVersion": RG, "kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}


def binding(kind, name, ns, ref_kind, ref, *subjects):
    meta = {"name": name} if ns is None else {"name": name, "namespace": ns}
    return {"apiVersion": RG, "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref},
            "subjects": list(subjects)}


def sa(account: ServiceAccount) -> dict:
    return {"kind": "ServiceAccount", "name": account.name, "namespace": account.namespace}


def rule(verbs, resources, groups=("",), names=None):
    r = {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}
    if names is not None:
        r["resourceNames"] = list(names)
    return r


def test_nothing_is_allowed_without_a_binding():
    rbac = Rbac([role("r", "a", rule(["*"], ["*"], ["*"]))])
    assert not rbac.allowed(ALICE, Request("get", "pods", namespace="a", name="p"))


def test_role_binding_grants_in_its_own_namespace_only():
    rbac = Rbac([role("r", "a", rule(["get"], ["pods"])), binding("RoleBinding", "rb", "a", "Role", "r", sa(ALICE))])
    assert rbac.allowed(ALICE, Request("get", "pods", namespace="a", name="p"))
    assert not rbac.allowed(ALICE, Request("get", "pods", namespace="b", name="p"))
    assert not rbac.allowed(ALICE, Request("get", "pods", namespace=None, name="p"))  # not across namespaces
    assert not rbac.allowed(BOB, Request("get", "pods", namespace="a", name="p"))  # another subject
    assert not rbac.allowed(ALICE, Request("delete", "pods", namespace="a", name="p"))  # another verb
    assert not rbac.allowed(ALICE, Request("get", "pods", "apps", namespace="a", name="p"))  # another group


def test_a_role_binding_cannot_use_a_role_of_another_namespace():
    rbac = Rbac([role("r", "b", rule(["get"], ["pods"])), binding("RoleBinding", "rb", "a", "Role", "r", sa(ALICE))])
    assert not rbac.allowed(ALICE, Request("get", "pods", namespace="a", name="p"))
    assert not rbac.allowed(ALICE, Request("get", "pods", namespace="b", name="p"))


def test_cluster_role_bound_by_a_role_binding_is_namespaced():
    docs = [cluster_role("c", rule(["get", "list"], ["pods", "nodes"])),
            binding("RoleBinding", "rb", "a", "ClusterRole", "c", sa(ALICE))]
    rbac = Rbac(docs)
    assert rbac.allowed(ALICE, Request("list", "pods", namespace="a"))
    assert not rbac.allowed(ALICE, Request("list", "pods", namespace="b"))
    assert not rbac.allowed(ALICE, Request("list", "nodes"))  # cluster-scoped: never through a RoleBinding
    rbac = Rbac([*docs, binding("ClusterRoleBinding", "crb", None, "ClusterRole", "c", sa(ALICE))])
    assert rbac.allowed(ALICE, Request("list", "nodes")) and rbac.allowed(ALICE, Request("list", "pods", namespace="b"))


def test_permissions_are_the_union_of_every_binding():
    rbac = Rbac([role("r1", "a", rule(["get"], ["pods"])), role("r2", "a", rule(["delete"], ["pods"])),
                 binding("RoleBinding", "b1", "a", "Role", "r1", sa(ALICE)),
                 binding("RoleBinding", "b2", "a", "Role", "r2", sa(ALICE))])
    assert rbac.allowed(ALICE, Request("get", "pods", namespace="a", name="p"))
    assert rbac.allowed(ALICE, Request("delete", "pods", namespace="a", name="p"))
    assert not rbac.allowed(ALICE, Request("create", "pods", namespace="a"))


@pytest.mark.parametrize(("r", "req", "expected"), [
    (rule(["*"], ["pods"]), Request("escalate", "pods", namespace="a"), True),          # verb wildcard
    (rule(["get"], ["*"]), Request("get", "secrets", namespace="a"), True),             # resource wildcard
    (rule(["get"], ["*"]), Request("get", "pods", namespace="a", subresource="log"), True),
    (rule(["get"], ["deployments"], ["*"]), Request("get", "deployments", "apps"), True),  # group wildcard
    (rule(["get"], ["deployments"], [""]), Request("get", "deployments", "apps"), False),
    (rule(["get"], ["pods"]), Request("get", "pods", subresource="log"), False),        # no subresource by parent
    (rule(["get"], ["pods/log"]), Request("get", "pods", subresource="log"), True),
    (rule(["get"], ["pods/log"]), Request("get", "pods"), False),
    (rule(["create"], ["*/token"]), Request("create", "serviceaccounts", subresource="token"), True),
    (rule(["create"], ["*/token"]), Request("create", "serviceaccounts"), False),
    (rule(["create"], ["*/exec"]), Request("create", "pods", subresource="attach"), False),
    (rule(["get"], ["pods"], names=["p1"]), Request("get", "pods", name="p1"), True),   # resourceNames
    (rule(["get"], ["pods"], names=["p1"]), Request("get", "pods", name="p2"), False),
    (rule(["list"], ["pods"], names=["p1"]), Request("list", "pods"), False),           # a collection has no name
    (rule(["create"], ["pods"], names=["p1"]), Request("create", "pods"), False),       # create: name not known
    (rule(["get"], ["pods"], names=[]), Request("get", "pods", name="p2"), True),       # empty list = any name
])  # fmt: skip
def test_rule_matching(r, req, expected):
    assert rule_allows(r, req) is expected


def test_subjects_by_user_name_and_by_group():
    c = cluster_role("c", rule(["list"], ["nodes"]))
    user = {"kind": "User", "name": "system:serviceaccount:a:alice"}
    assert Rbac([c, binding("ClusterRoleBinding", "x", None, "ClusterRole", "c", user)]).allowed(
        ALICE, Request("list", "nodes"))
    group = {"kind": "Group", "name": "system:serviceaccounts:a"}
    rbac = Rbac([c, binding("ClusterRoleBinding", "x", None, "ClusterRole", "c", group)])
    assert rbac.allowed(ALICE, Request("list", "nodes")) and not rbac.allowed(BOB, Request("list", "nodes"))
    everyone = {"kind": "Group", "name": "system:serviceaccounts"}
    assert Rbac([c, binding("ClusterRoleBinding", "x", None, "ClusterRole", "c", everyone)]).allowed(
        BOB, Request("list", "nodes"))


def test_a_service_account_subject_without_namespace_is_the_bindings():
    rbac = Rbac([role("r", "a", rule(["get"], ["pods"])),
                 binding("RoleBinding", "rb", "a", "Role", "r", {"kind": "ServiceAccount", "name": "alice"})])
    assert rbac.allowed(ALICE, Request("get", "pods", namespace="a", name="p"))
    assert not rbac.allowed(ServiceAccount("alice", "b"), Request("get", "pods", namespace="a", name="p"))


def test_pod_creation_in_a_namespace_is_acting_as_its_accounts_and_reading_its_secrets():
    rbac = Rbac([role("r", "b", rule(["create"], ["pods"])), binding("RoleBinding", "rb", "b", "Role", "r", sa(ALICE))])
    assert rbac.can_act_as(ALICE, BOB) and rbac.can_read_secrets(ALICE, "b")
    assert not rbac.allowed(ALICE, Request("get", "secrets", namespace="b", name="s"))  # not directly, though
    assert not rbac.can_act_as(ALICE, ServiceAccount("carol", "c")) and not rbac.can_read_secrets(ALICE, "c")


def test_patching_a_named_deployment_runs_its_pods():
    rbac = Rbac([role("r", "b", rule(["patch"], ["deployments"], ["apps"], names=["web"])),
                 binding("RoleBinding", "rb", "b", "Role", "r", sa(ALICE))])
    assert rbac.can_run_pods_in(ALICE, "b")  # resourceNames limit which Deployment, not what its template says
    rbac = Rbac([role("r", "b", rule(["get"], ["deployments"], ["apps"], names=["web"])),
                 binding("RoleBinding", "rb", "b", "Role", "r", sa(ALICE))])
    assert not rbac.can_run_pods_in(ALICE, "b")


@pytest.mark.parametrize("r", [
    rule(["impersonate"], ["serviceaccounts"]),
    rule(["create"], ["serviceaccounts/token"]),
    rule(["get"], ["secrets"], names=["bob-token"]),
    rule(["list"], ["secrets"]),
    rule(["create"], ["jobs"], ["batch"]),
])  # fmt: skip
def test_every_documented_path_to_another_account(r):
    rbac = Rbac([role("r", "b", r), binding("RoleBinding", "rb", "b", "Role", "r", sa(ALICE))])
    assert rbac.can_act_as(ALICE, BOB)


def test_impersonating_the_user_name_cluster_wide():
    rbac = Rbac([cluster_role("c", rule(["impersonate"], ["users"])),
                 binding("ClusterRoleBinding", "x", None, "ClusterRole", "c", sa(ALICE))])
    assert rbac.can_act_as(ALICE, BOB)
    limited = Rbac([cluster_role("c", rule(["impersonate"], ["users"], names=["system:serviceaccount:c:carol"])),
                    binding("ClusterRoleBinding", "x", None, "ClusterRole", "c", sa(ALICE))])
    assert not limited.can_act_as(ALICE, BOB) and limited.can_act_as(ALICE, ServiceAccount("carol", "c"))
