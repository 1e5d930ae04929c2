"""The controller's RBAC grants exactly the (verb, resource) pairs its requests need, read from the request
log of a live scale-up/down, a restart, the dry run's reads and the observation."""

from __future__ import annotations

import re

from gesscale.k8s.rbac import controller_rbac
from gesscale.observation import Placement
from tests.fixtures.k8s import NAMESPACE, PODS, driver_pod
from tests.k8s.helpers import LMAP, build_cluster, make_backend

PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/v1)(?:/namespaces/[^/]+)?/(?P<resource>[a-z]+)(?P<name>/[^/]+)?$")


def _verb(method: str, named: bool) -> str:
    return {"GET": "get" if named else "list", "PATCH": "patch", "POST": "create", "DELETE": "delete",
            "PUT": "update"}[method]


def test_rbac_matches_the_requests_made(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver)
    fake_kube.put(PODS, NAMESPACE, driver_pod())
    live = make_backend(fake_kube, fake_driver)
    live.observe()
    live.nodes()
    live.apply(Placement(("n1", "n2", "n4"), LMAP.nd_max(("n1", "n2", "n4"))))
    live.apply(Placement(("n2", "n4"), 12.0))
    restart = make_backend(fake_kube, fake_driver, strategy="restart")
    restart.apply(Placement(("n2", "n4", "n5"), 30.0))

    used = set()
    for r in fake_kube.requests("gesscale-controller"):
        m = PATH.match(r.path)
        assert m, r.path
        used.add((m["group"] or "", m["resource"], _verb(r.method, bool(m["name"]))))
    granted = set()
    for doc in controller_rbac(NAMESPACE, "gesscale-controller"):
        for rule in doc.get("rules", []):
            granted |= {(g, res, v) for g in rule["apiGroups"] for res in rule["resources"] for v in rule["verbs"]}
    assert used == granted, sorted(used)
