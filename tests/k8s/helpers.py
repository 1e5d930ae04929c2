"""A 5-node cluster in the fake API server, the backend wired to it, and a scripted policy."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from gesscale.k8s.api import KubeApi
from gesscale.k8s.backend import K8sBackend, K8sBackendConfig
from gesscale.k8s.retry import RetryPolicy
from gesscale.latency_map import latency_map_from_dict
from gesscale.observation import Decision, Observation
from gesscale.policies.base import Policy, PolicyContext
from jobs.hook_client import HttpDriverHook
from tests.fixtures.k8s import APP, DEPLOYMENTS, NAMESPACE, NODES, TOKEN, FakeApiServer, FakeSparkDriver, node

POOL = "gesscale.io/pool"
# {n1, n2} run executors (ND_max 20). Adding n4 keeps ND_max at 20 (n3: 80, n5: 30): scale-up picks n4.
# In {n1, n2, n4}, n1 has the greatest latency to the others (20 and 14; sum 34): scale-down removes n1.
LMAP = latency_map_from_dict({
    "nodes": ["n1", "n2", "n3", "n4", "n5"],
    "rtt_ms": {
        "n1": {"n2": 20, "n3": 80, "n4": 14, "n5": 30},
        "n2": {"n3": 80, "n4": 12, "n5": 30},
        "n3": {"n4": 80, "n5": 80},
        "n4": {"n5": 30},
    },
})


def build_cluster(api: FakeApiServer, driver: FakeSparkDriver, running: tuple[str, ...] = ("n1", "n2")) -> None:
    """Five Ready nodes (plus the k3s server), executors on `running` (labelled), the driver Deployment."""
    for name in ("server", *LMAP.names):
        api.put(NODES, None, node(name, {POOL: APP} if name in running else {}))
    for name in running:
        driver.start_executor(name)
    api.put(DEPLOYMENTS, NAMESPACE, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": f"{APP}-driver", "namespace": NAMESPACE},
        "spec": {"replicas": 1, "template": {"metadata": {"annotations": {"gesscale.io/executors": "2"}}}},
    })
    driver.observations.append(observation(1))


def observation(batch_id: int, rows: int = 1000, backlog: int = 0) -> dict[str, Any]:
    """An observation as the job's `GET /observation` returns it."""
    return {"time": 0.0, "batch_id": batch_id, "num_input_rows": rows, "input_rate": 100.0,
            "processed_rate": 120.0, "batch_duration_ms": 900, "backlog": backlog, "held_back": False,
            "bp_upstream": 0.0, "bp_operator": 0.0, "bp_window_s": 60.0, "executors": []}


def make_backend(api: FakeApiServer, driver: FakeSparkDriver, *, strategy: str = "live", timeout_s: float = 5.0,
                 attempts: int = 3, ready_timeout_s: float = 5.0, **cfg: Any) -> K8sBackend:
    """The backend against the fakes, with short periods and waits."""
    kube = KubeApi.connect(server=api.url, timeout_s=timeout_s, retry=RetryPolicy(attempts=attempts, backoff_s=0.05))
    hook = HttpDriverHook(driver.url, TOKEN, timeout_s=5.0, backoff_s=0.05)
    config = K8sBackendConfig(app=APP, namespace=NAMESPACE, strategy=strategy, control_period_s=0.3, sample_s=0.1,
                              poll_s=0.05, ready_timeout_s=ready_timeout_s, gone_timeout_s=ready_timeout_s, **cfg)
    return K8sBackend(kube, hook, LMAP, config)


def labelled(api: FakeApiServer) -> set[str]:
    """Nodes with the pool label of the app."""
    return {n for n, o in api.objects(NODES).items() if (o["metadata"].get("labels") or {}).get(POOL) == APP}


def executor_nodes(driver: FakeSparkDriver) -> set[str]:
    """Nodes with a running executor pod."""
    return {p["spec"].get("nodeName") for p in driver.executor_pods().values() if p["status"]["phase"] == "Running"}


class ScriptedPolicy(Policy):
    """Asks for the given replica counts one period after another (placement is left to `place`)."""

    id: ClassVar[str] = ""
    latency_aware: ClassVar[bool] = True

    def __init__(self, targets: list[int]) -> None:
        self.targets = list(targets)

    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """The next scripted target (the current count when the script is over)."""
        return Decision(self.targets.pop(0) if self.targets else obs.n, "scripted")


def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll `check` until it holds or `timeout_s` passes (for what the fake cluster does in its own threads)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
