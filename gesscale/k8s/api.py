"""The few Kubernetes API calls the controller makes, over the official `kubernetes` client.

Only what the RBAC manifest grants (manifests/rbac.yaml): nodes list/patch, pods list, the driver
Deployment get/patch (restart strategy only), events create. Responses are returned as plain dicts (raw JSON)
so the backend does not depend on the client's model classes. Every call has a timeout; failures are retried
per `gesscale.k8s.retry` and otherwise raised as `KubeApiError`, a `UserError` with one clear line.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from gesscale import __version__
from gesscale.errors import UserError
from gesscale.k8s.retry import RetryPolicy, should_retry

log = logging.getLogger(__name__)

USER_AGENT = f"gesscale-controller/{__version__}"
MERGE_PATCH = "application/merge-patch+json"


class KubeApiError(UserError):
    """A Kubernetes API call failed for good; `status` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


def _explain(status: int | None, what: str, body: str) -> str:
    detail = ""
    try:
        detail = json.loads(body).get("message", "") if body else ""
    except (ValueError, AttributeError):
        detail = ""
    hint = {
        401: "the API server rejected the credentials (check the kubeconfig or the service account token)",
        403: "forbidden: the controller's service account lacks this permission (apply manifests/rbac.yaml)",
        404: "not found (deleted, or a wrong name or namespace)",
        409: "conflict: another writer changed it at the same time, and retries did not get through",
        422: "the API server rejected the request as invalid",
    }.get(status or 0, f"HTTP {status}" if status else "no answer from the API server (timeout or refused)")
    return f"kubernetes: {what}: {hint}" + (f" ({detail})" if detail else "")


class KubeApi:
    """Nodes, pods, the driver Deployment and events, with timeouts and safe retries."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        api_client.user_agent = USER_AGENT
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    @classmethod
    def connect(
        cls, *, server: str | None = None, kubeconfig: str | None = None, context: str | None = None, **kw: Any
    ) -> KubeApi:
        """Connect with an explicit server URL, a kubeconfig (file/context), or the in-cluster service account."""
        cfg = client.Configuration()
        try:
            if server:
                cfg.host = server.rstrip("/")
            elif kubeconfig or context:
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
            else:
                try:
                    config.load_incluster_config(client_configuration=cfg)
                except config.ConfigException:
                    config.load_kube_config(client_configuration=cfg)
        except (config.ConfigException, OSError) as err:
            raise UserError(f"kubernetes: no usable configuration ({err}); pass --server or --kubeconfig") from None
        cfg.retries = False  # retries are ours, idempotent calls only (urllib3 would also repeat a PATCH)
        return cls(client.ApiClient(cfg), **kw)

    # -- the retry loop ------------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any, idempotent: bool = True, **kw: Any) -> Any:
        attempt = 0
        while True:
            attempt += 1
            status: int | None
            try:
                resp = fn(*args, _preload_content=False, _request_timeout=self.timeout_s, **kw)
                return json.loads(resp.data or b"{}")
            except ApiException as err:
                status, body = err.status, err.body or ""
            except urllib3.exceptions.HTTPError as err:
                status, body = None, ""
                log.debug("%s: %s", what, err)
            if attempt >= self.retry.attempts or not should_retry(status, idempotent):
                raise KubeApiError(_explain(status, what, body), status)
            delay = self.retry.delay(attempt)
            log.warning("kubernetes: %s failed (%s); retry %d in %.1f s", what, status or "no answer", attempt, delay)
            self._sleep(delay)

    # -- nodes ---------------------------------------------------------------------------------------------
    def list_nodes(self) -> list[dict[str, Any]]:
        """Every node as its raw JSON object."""
        return list(self._call("list nodes", self.core.list_node).get("items") or [])

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict[str, Any]:
        """Set (value) or remove (None) labels on a node with a JSON merge patch (idempotent)."""
        body = {"metadata": {"labels": labels}}
        what = f"patch labels of node {name}"
        return dict(self._call(what, self.core.patch_node, name, body, _content_type=MERGE_PATCH))

    # -- pods ----------------------------------------------------------------------------------------------
    def list_pods(self, namespace: str, label_selector: str, field_selector: str | None = None) -> list[dict[str, Any]]:
        """Pods of `namespace` matching the selectors, as raw JSON objects."""
        kw: dict[str, Any] = {"label_selector": label_selector}
        if field_selector:
            kw["field_selector"] = field_selector
        what = f"list pods {label_selector} in {namespace}"
        return list(self._call(what, self.core.list_namespaced_pod, namespace, **kw).get("items") or [])

    # -- the driver Deployment (restart strategy) --------------------------------------------------------------
    def read_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        """The Deployment `name` of `namespace`."""
        return dict(self._call(f"read deployment {namespace}/{name}", self.apps.read_namespaced_deployment, name,
                               namespace))

    def patch_deployment(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch of a Deployment (replicas, pod-template annotations: idempotent)."""
        return dict(self._call(f"patch deployment {namespace}/{name}", self.apps.patch_namespaced_deployment, name,
                               namespace, body, _content_type=MERGE_PATCH))

    # -- events --------------------------------------------------------------------------------------------
    def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create an Event (not retried: not idempotent)."""
        return dict(self._call(f"create event in {namespace}", self.core.create_namespaced_event, namespace, body,
                               idempotent=False))
