"""What `gesscale k8s render` generates for Spark on Kubernetes (pure: dicts in, dicts out, no I/O).

- the Spark settings of the job (`spark_conf`): k8s master, image, namespace, the executor node selector on the
  pool label, executor labels, resources sized for Pi-class nodes, the driver's service account, the executor
  pod template file;
- the executor pod template (`executor_pod_template`): node selector on the pool label plus a *required* pod
  anti-affinity by hostname among this application's executors — one executor per node, so the node the
  controller labels is the node that gets the next executor;
- the driver side (`driver_manifests`): a one-replica Deployment (strategy Recreate) running `gesscale job run`
  with its checkpoint on a PersistentVolumeClaim, a Service for the driver's HTTP API, the ConfigMap holding the
  pod template, the driver's ServiceAccount with the Role Spark needs to manage its executor pods
  (`gesscale.k8s.rbac.driver_rbac`), and the NetworkPolicies of driver and executors.
Every pod is hardened as `gesscale.k8s.security` says (non-root, no privilege escalation, no capability,
RuntimeDefault seccomp, read-only root with an emptyDir at /tmp).

The executor count the driver starts with is an annotation of the Deployment's pod template, read back through
the downward API; the `restart` strategy changes that annotation, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gesscale.errors import UserError, brief
from gesscale.k8s.names import (
    APP_LABEL,
    EXECUTORS_ANNOTATION,
    HOSTNAME_TOPOLOGY,
    POOL_LABEL,
    ROLE_LABEL,
    check_dns_label,
)
from gesscale.k8s.rbac import CONTROLLER_NAMESPACE, driver_rbac
from gesscale.k8s.security import (
    JOB_UID,
    container_security,
    job_network_policies,
    pod_security,
    scratch_mount,
    scratch_volume,
)
from gesscale.names import check_name

TEMPLATE_DIR = "/opt/gesscale/k8s"
TEMPLATE_FILE = "executor-pod-template.yaml"
CHECKPOINT_MOUNT = "/checkpoint"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"  # the container name Spark gives executors


def _mebibytes(text: str) -> int:
    """Spark memory strings ('1g', '384m', '512k') in MiB."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    t = text.strip().lower().removesuffix("b")
    if not t or t[-1] not in units or not t[:-1].replace(".", "", 1).isdigit():
        raise UserError(f"memory {text!r}: expected a number with k, m, g or t (e.g. 1g, 384m)")
    return int(round(float(t[:-1]) * units[t[-1]]))


_CPU = re.compile(r"^(?:[0-9]+(?:\.[0-9]{1,3})?|[0-9]+m)$")


def _cpu(text: str, what: str) -> str:
    """A Kubernetes CPU quantity ('1', '0.5', '500m'), above zero; a `UserError` otherwise."""
    t = str(text).strip()
    if not _CPU.match(t) or float(t.removesuffix("m")) == 0:
        raise UserError(f"{what} {brief(text)}: expected a CPU quantity above 0 such as 1, 0.5 or 500m")
    return t


@dataclass(frozen=True)
class SubmitSpec:
    """Every knob of the generated Spark-on-Kubernetes deployment, with defaults for Raspberry Pi 4 nodes.

    A Pi 4 has 4 cores and 2-8 GB; one executor per node with 1 core and 1 GiB heap leaves room for the
    kubelet, k3s and a co-located broker. The driver runs on any node except where `driver_node_selector`
    says otherwise (e.g. the k3s server).
    """

    app: str = "gesscale-job"
    namespace: str = "spark"
    image: str = "gesscale-job:0.1.0"
    controller_image: str = "gesscale-controller:0.1.0"  # Dockerfile, target `controller`
    controller_strategy: str = "live"  # `gesscale k8s run --strategy` of the controller Deployment
    bootstrap: str = "pi02:9092"  # the kafka host of inventory/pi10 (k3s resolves node names in pods)
    input_topic: str = "rides"
    output_topic: str = "rides-enriched"
    query: str = "nearest-landmark"  # the job's `--query`: a built-in or a module in the image (`check_query`)
    executors: int = 2
    executor_cores: int = 1
    executor_cpu_request: str = "1"
    executor_cpu_limit: str = "1"
    executor_memory: str = "1g"
    executor_memory_overhead: str = "384m"
    driver_memory: str = "1g"
    driver_cpu_request: str = "500m"
    driver_service_account: str = "spark-driver"
    controller_service_account: str = "gesscale-controller"
    controller_namespace: str = CONTROLLER_NAMESPACE  # never the job's: see gesscale.k8s.rbac
    checkpoint_claim: str = "gesscale-checkpoint"
    checkpoint_size: str = "2Gi"
    storage_class: str | None = None  # None: the cluster's default (k3s: local-path)
    token_secret: str = "gesscale-job-token"  # Secret with key `token`: the scaling hook's bearer token
    http_port: int = 4041
    ui_port: int = 4040
    pool_label: str = POOL_LABEL
    driver_node_selector: dict[str, str] = field(default_factory=dict)
    extra_conf: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name("image", self.image, "--image")  # rendered into the manifests and Spark's configuration
        check_name("image", self.controller_image, "--controller-image")
        check_dns_label(self.app, "application name")
        check_dns_label(self.namespace, "namespace")
        check_dns_label(self.controller_namespace, "controller namespace")
        if self.controller_namespace == self.namespace:
            raise UserError(f"the controller's namespace must differ from the job's ({self.namespace!r}): the "
                            "driver creates pods there, and a pod may run under any service account of its namespace")
        for what, name in (
            ("driver service account", self.driver_service_account),
            ("controller service account", self.controller_service_account),
            ("checkpoint claim", self.checkpoint_claim),
            ("token secret", self.token_secret),
        ):
            check_dns_label(name, what)
        if self.controller_strategy not in ("live", "restart"):
            raise UserError(f"controller strategy {self.controller_strategy!r}: expected live or restart")
        if self.executors < 0:
            raise UserError("executors must be >= 0")
        if self.executor_cores < 1:
            raise UserError("executor cores must be >= 1")
        for port in (self.http_port, self.ui_port):
            if not 1 <= port <= 65535:
                raise UserError(f"port {port} out of range")
        _cpu(self.executor_cpu_request, "executor CPU")
        _cpu(self.executor_cpu_limit, "executor CPU limit")
        _cpu(self.driver_cpu_request, "driver CPU")
        _mebibytes(self.executor_memory)
        _mebibytes(self.executor_memory_overhead)
        _mebibytes(self.driver_memory)
        check_query(self.query)

    @property
    def executor_pod_memory(self) -> str:
        """Memory request = limit of an executor pod: heap + overhead (what Spark itself asks for)."""
        return f"{_mebibytes(self.executor_memory) + _mebibytes(self.executor_memory_overhead)}Mi"

    @property
    def driver_service(self) -> str:
        """Name of the Service in front of the driver's HTTP API."""
        return f"{self.app}-driver"

    @property
    def hook_url(self) -> str:
        """In-cluster URL of the driver's HTTP API (metrics + scaling hook)."""
        return f"http://{self.driver_service}.{self.namespace}.svc:{self.http_port}"


def check_query(spec: str) -> None:
    """UserError unless the driver pod can load this `--query`: a built-in name, or `package.module[:function]`
    installed in the job image (not checked here: the image is not). A file on this machine is refused: it would
    not reach the pod; ship it in the image as a module instead (docs/queries.md)."""
    import re

    from jobs.query import BUILT_IN, kind_of, split_spec

    if spec in BUILT_IN:
        return
    if kind_of(spec) == "file":
        raise UserError(f"--query {spec}: a file on this machine does not reach the driver pod; on Kubernetes use a "
                        f"built-in query ({', '.join(BUILT_IN)}) or a module installed in the job image "
                        "(package.module[:function]; docs/queries.md)")
    module, func = split_spec(spec)
    name = r"[A-Za-z_]\w*"
    if not re.fullmatch(rf"{name}(\.{name})*", module) or not re.fullmatch(name, func):
        raise UserError(f"--query {spec!r}: not a built-in query ({', '.join(BUILT_IN)}) nor package.module[:function]")


def spark_conf(spec: SubmitSpec) -> dict[str, str]:
    """The Spark settings of the job on Kubernetes, key by key (order is stable for printing)."""
    conf = {
        "spark.master": "k8s://https://kubernetes.default.svc",
        "spark.submit.deployMode": "client",  # the driver is the Deployment's pod itself
        "spark.kubernetes.namespace": spec.namespace,
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.authenticate.driver.serviceAccountName": spec.driver_service_account,
        "spark.kubernetes.executor.podTemplateFile": f"{TEMPLATE_DIR}/{TEMPLATE_FILE}",
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.kubernetes.executor.podNamePrefix": spec.app,
        f"spark.kubernetes.executor.node.selector.{spec.pool_label}": spec.app,
        f"spark.kubernetes.executor.label.{APP_LABEL}": spec.app,
        f"spark.kubernetes.executor.label.{ROLE_LABEL}": "executor",
        "spark.kubernetes.executor.deleteOnTermination": "true",  # a removed executor's pod goes away
        "spark.executor.cores": str(spec.executor_cores),
        "spark.kubernetes.executor.request.cores": spec.executor_cpu_request,
        "spark.kubernetes.executor.limit.cores": spec.executor_cpu_limit,
        "spark.executor.memory": spec.executor_memory,
        "spark.executor.memoryOverhead": spec.executor_memory_overhead,
        "spark.driver.memory": spec.driver_memory,
        "spark.dynamicAllocation.enabled": "false",  # the controller sets the executor target, not Spark
        "spark.executorEnv.PYSPARK_PYTHON": "python3",
        # Spark's own RPC authentication: on Kubernetes Spark makes a secret per application and hands it to
        # its executors itself (Spark's security docs, "Authentication"); the UI's kill links are off.
        "spark.authenticate": "true",
        "spark.ui.killEnabled": "false",
    }
    conf.update(spec.extra_conf)
    return conf


def executor_pod_template(spec: SubmitSpec) -> dict[str, Any]:
    """The pod template every executor is made from: pool selector, one-per-node anti-affinity, resources."""
    own = {APP_LABEL: spec.app, ROLE_LABEL: "executor"}
    resources = {
        "requests": {"cpu": spec.executor_cpu_request, "memory": spec.executor_pod_memory},
        "limits": {"cpu": spec.executor_cpu_limit, "memory": spec.executor_pod_memory},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": dict(own)},
        "spec": {
            "automountServiceAccountToken": False,  # executors never call the API server
            "securityContext": pod_security(JOB_UID),
            "nodeSelector": {spec.pool_label: spec.app},
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": dict(own)}, "topologyKey": HOSTNAME_TOPOLOGY}
                    ]
                }
            },
            "containers": [{"name": EXECUTOR_CONTAINER, "resources": resources,
                            "securityContext": container_security(JOB_UID), "volumeMounts": [scratch_mount()]}],
            "volumes": [scratch_volume()],
        },
    }


def _driver_args(spec: SubmitSpec) -> list[str]:
    args = [
        "job", "run",
        "--bootstrap", spec.bootstrap,
        "--input", spec.input_topic,
        "--output", spec.output_topic,
        "--checkpoint", f"{CHECKPOINT_MOUNT}/{spec.app}",
        "--master", spark_conf(spec)["spark.master"],
        "--executors", "$(GESSCALE_EXECUTORS)",  # expanded by the kubelet from the env below
        "--http-host", "0.0.0.0",
        "--http-port", str(spec.http_port),
        "--ui-port", str(spec.ui_port),
        "--driver-host", "$(POD_IP)",
    ]
    if spec.query != "nearest-landmark":  # the job's default: the committed sample manifests stay as they are
        args += ["--query", spec.query]
    conf = spark_conf(spec)
    conf.pop("spark.master")
    conf["spark.executor.instances"] = "$(GESSCALE_EXECUTORS)"
    conf["spark.kubernetes.driver.pod.name"] = "$(POD_NAME)"  # executors are owned by (and die with) the driver
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def driver_manifests(spec: SubmitSpec, template_yaml: str) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding of the driver, pod-template ConfigMap, checkpoint claim, Service,
    and the driver Deployment. `template_yaml` is the executor pod template as YAML text."""
    ns = spec.namespace
    labels = {APP_LABEL: spec.app, ROLE_LABEL: "driver"}
    meta = {"namespace": ns, "labels": {APP_LABEL: spec.app}}
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec.checkpoint_size}},
    }
    if spec.storage_class:
        claim["storageClassName"] = spec.storage_class
    pod_spec: dict[str, Any] = {
        "serviceAccountName": spec.driver_service_account,
        "securityContext": pod_security(JOB_UID, fs_group=JOB_UID),
        "containers": [
            {
                "name": "driver",
                "image": spec.image,
                "command": ["gesscale"],
                "args": _driver_args(spec),
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {
                        "name": "GESSCALE_EXECUTORS",
                        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{EXECUTORS_ANNOTATION}']"}},
                    },
                    {
                        "name": "GESSCALE_JOB_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": spec.token_secret, "key": "token"}},
                    },
                    {"name": "PYSPARK_PYTHON", "value": "python3"},
                ],
                "ports": [
                    {"name": "api", "containerPort": spec.http_port},
                    {"name": "ui", "containerPort": spec.ui_port},
                ],
                "readinessProbe": {"httpGet": {"path": "/metrics", "port": spec.http_port}, "periodSeconds": 5},
                "resources": {
                    "requests": {"cpu": spec.driver_cpu_request, "memory": f"{_mebibytes(spec.driver_memory) + 384}Mi"}
                },
                "securityContext": container_security(JOB_UID),
                "volumeMounts": [
                    {"name": "checkpoint", "mountPath": CHECKPOINT_MOUNT},
                    {"name": "pod-template", "mountPath": TEMPLATE_DIR, "readOnly": True},
                    scratch_mount(),
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoint", "persistentVolumeClaim": {"claimName": spec.checkpoint_claim}},
            {"name": "pod-template", "configMap": {"name": f"{spec.app}-pod-template"}},
            scratch_volume(),
        ],
    }
    if spec.driver_node_selector:
        pod_spec["nodeSelector"] = dict(spec.driver_node_selector)
    return [
        *driver_rbac(ns, spec.driver_service_account),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{spec.app}-pod-template", **meta},
            "data": {TEMPLATE_FILE: template_yaml},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": spec.checkpoint_claim, **meta},
            "spec": claim,
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": spec.driver_service, **meta},
            "spec": {
                "selector": dict(labels),
                "ports": [
                    {"name": "api", "port": spec.http_port, "targetPort": spec.http_port},
                    {"name": "ui", "port": spec.ui_port, "targetPort": spec.ui_port},
                ],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": spec.driver_service, **meta},
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},  # never two drivers on one checkpoint
                "selector": {"matchLabels": dict(labels)},
                "template": {
                    "metadata": {"labels": dict(labels), "annotations": {EXECUTORS_ANNOTATION: str(spec.executors)}},
                    "spec": pod_spec,
                },
            },
        },
        *job_network_policies(spec.app, ns, spec.controller_namespace, spec.http_port),
    ]
