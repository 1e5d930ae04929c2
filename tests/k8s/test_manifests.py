"""The generated spark settings, executor pod template, driver side and RBAC, value by value; the committed
samples under manifests/ equal the generator's output; kubectl accepts them (client dry run)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from gesscale.errors import UserError
from gesscale.k8s.manifests import bundle, validate
from gesscale.k8s.rbac import controller_rbac
from gesscale.k8s.spec import SubmitSpec, driver_manifests, executor_pod_template, spark_conf
from tests.fixtures.paths import ROOT

SPEC = SubmitSpec(app="taxi", namespace="fog", image="reg.local/gesscale-job:1", executors=3,
                  executor_memory="768m", executor_memory_overhead="256m", executor_cpu_request="900m",
                  executor_cpu_limit="1")


def test_spark_conf_value_by_value():
    conf = spark_conf(SPEC)
    assert conf["spark.master"] == "k8s://https://kubernetes.default.svc"
    assert conf["spark.kubernetes.namespace"] == "fog"
    assert conf["spark.kubernetes.container.image"] == "reg.local/gesscale-job:1"
    assert conf["spark.kubernetes.executor.node.selector.gesscale.io/pool"] == "taxi"
    assert conf["spark.kubernetes.executor.label.gesscale.io/app"] == "taxi"
    assert conf["spark.kubernetes.executor.label.gesscale.io/role"] == "executor"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "spark-driver"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == "/opt/gesscale/k8s/executor-pod-template.yaml"
    assert conf["spark.kubernetes.executor.request.cores"] == "900m"
    assert conf["spark.kubernetes.executor.limit.cores"] == "1"
    assert conf["spark.executor.memory"] == "768m"
    assert conf["spark.executor.memoryOverhead"] == "256m"
    assert conf["spark.executor.cores"] == "1"
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert conf["spark.kubernetes.executor.deleteOnTermination"] == "true"


def test_executor_pod_template_value_by_value():
    pod = executor_pod_template(SPEC)
    spec = pod["spec"]
    assert pod["metadata"]["labels"] == {"gesscale.io/app": "taxi", "gesscale.io/role": "executor"}
    assert spec["nodeSelector"] == {"gesscale.io/pool": "taxi"}
    terms = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [{"labelSelector": {"matchLabels": {"gesscale.io/app": "taxi", "gesscale.io/role": "executor"}},
                      "topologyKey": "kubernetes.io/hostname"}]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in spec["affinity"]["podAntiAffinity"]
    (container,) = spec["containers"]
    assert container["name"] == "spark-kubernetes-executor"
    assert container["resources"] == {"requests": {"cpu": "900m", "memory": "1024Mi"},
                                      "limits": {"cpu": "1", "memory": "1024Mi"}}  # 768m heap + 256m overhead


def test_driver_side_value_by_value():
    docs = {d["kind"]: d for d in driver_manifests(SPEC, "template")}
    dep = docs["Deployment"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"gesscale.io/executors": "3"}
    assert pod["spec"]["serviceAccountName"] == "spark-driver"
    (c,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    count = env["GESSCALE_EXECUTORS"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert count == "metadata.annotations['gesscale.io/executors']"
    assert env["GESSCALE_JOB_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "gesscale-job-token", "key": "token"}
    args = c["args"]
    assert args[:2] == ["job", "run"] and args[args.index("--executors") + 1] == "$(GESSCALE_EXECUTORS)"
    assert args[args.index("--checkpoint") + 1] == "/checkpoint/taxi"
    assert "spark.kubernetes.executor.node.selector.gesscale.io/pool=taxi" in args
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert mounts["checkpoint"] == "/checkpoint"
    assert vols["checkpoint"]["persistentVolumeClaim"] == {"claimName": "gesscale-checkpoint"}
    assert docs["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert docs["ConfigMap"]["data"] == {"executor-pod-template.yaml": "template"}
    assert docs["Service"]["spec"]["selector"] == {"gesscale.io/app": "taxi", "gesscale.io/role": "driver"}
    assert docs["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": "spark-driver", "namespace": "fog"}]
    assert docs["Role"]["rules"] == [  # its executors, their config map, a list of claims: nothing else
        {"apiGroups": [""], "resources": ["pods"],
         "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "verbs": ["create", "get", "list", "delete", "deletecollection"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["list"]},
    ]


def test_controller_rbac_lists_only_what_it_uses():
    docs = {d["kind"]: d for d in controller_rbac("fog", "gesscale-controller", app="taxi")}
    assert docs["Namespace"]["metadata"]["name"] == "gesscale-system"
    assert docs["ServiceAccount"]["metadata"]["namespace"] == "gesscale-system"
    assert docs["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                                             "verbs": ["list", "patch"]}]
    assert docs["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["taxi-driver"],
         "verbs": ["get", "patch"]},
    ]
    assert docs["Role"]["metadata"]["namespace"] == "fog"
    assert docs["RoleBinding"]["subjects"][0]["namespace"] == "gesscale-system"
    live = {d["kind"]: d for d in controller_rbac("fog", "gesscale-controller", restart=False)}
    assert all(r["resources"] != ["deployments"] for r in live["Role"]["rules"])
    named = {d["kind"]: d for d in controller_rbac("fog", "gesscale-controller", nodes=["pi05", "pi04", "pi05"])}
    assert named["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes"], "resourceNames": ["pi04", "pi05"], "verbs": ["patch"]},
    ]


def test_the_controller_cannot_share_the_jobs_namespace():
    with pytest.raises(UserError, match="must differ"):
        controller_rbac("fog", "gesscale-controller", controller_namespace="fog")
    with pytest.raises(UserError, match="must differ"):
        SubmitSpec(namespace="fog", controller_namespace="fog")


def _pods(files: dict[str, str]) -> list[tuple[str, dict]]:
    """(where, pod spec) of every pod the bundle makes: Deployments' templates and the executor template."""
    found = []
    for name, text in files.items():
        if not name.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc["kind"] == "Deployment":
                found.append((f"{name} {doc['metadata']['name']}", doc["spec"]["template"]["spec"]))
            elif doc["kind"] == "Pod":
                found.append((name, doc["spec"]))
    return found


@pytest.mark.parametrize("spec", [SubmitSpec(), SPEC], ids=["defaults", "custom"])
def test_every_pod_and_container_is_hardened(spec):
    pods = _pods(bundle(spec))
    assert len(pods) == 3  # driver, controller, executor template
    for where, pod in pods:
        ctx = pod["securityContext"]
        assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] > 0, where
        assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, where
        scratch = [v["name"] for v in pod["volumes"] if "emptyDir" in v]
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True, where
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert mounts["/tmp"] in scratch, where  # the only writable scratch under a read-only root


def test_network_policies_let_only_the_controller_reach_the_hook():
    docs = [d for d in driver_manifests(SPEC, "template") if d["kind"] == "NetworkPolicy"]
    driver = next(d for d in docs if d["spec"]["podSelector"]["matchLabels"]["gesscale.io/role"] == "driver")
    hook, executors = driver["spec"]["ingress"]
    assert hook["ports"] == [{"protocol": "TCP", "port": SPEC.http_port}]
    (peer,) = hook["from"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "gesscale-system"}}
    assert peer["podSelector"] == {"matchLabels": {"gesscale.io/app": "taxi", "gesscale.io/role": "controller"}}
    assert executors == {"from": [{"podSelector": {"matchLabels": {"gesscale.io/app": "taxi",
                                                                  "gesscale.io/role": "executor"}}}]}
    assert driver["spec"]["policyTypes"] == ["Ingress"]
    controller = yaml.safe_load_all(bundle(SPEC)["controller.yaml"])
    deployment = next(controller)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert peer["podSelector"]["matchLabels"] == labels  # the policy selects the controller's own pods
    assert deployment["metadata"]["namespace"] == "gesscale-system"


def test_schema_check_rejects_a_typo_and_a_wrong_type():
    pod = executor_pod_template(SPEC)
    pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKy"] = "x"
    with pytest.raises(UserError, match="topologyKy"):
        validate(pod)
    pod = executor_pod_template(SPEC)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1
    with pytest.raises(UserError, match="cpu"):
        validate(pod)


@pytest.mark.parametrize("bad", [{"app": "Taxi_1"}, {"namespace": "-x"}, {"executor_memory": "lots"}])
def test_bad_options_are_user_errors(bad):
    with pytest.raises(UserError):
        SubmitSpec(**bad)


def test_committed_samples_are_the_generator_output():
    for name, text in bundle(SubmitSpec()).items():
        hint = f"manifests/{name} is stale: run `gesscale k8s render -o manifests`"
        assert (ROOT / "manifests" / name).read_text() == text, hint


def test_every_document_round_trips_through_yaml():
    for name, text in bundle(SPEC).items():
        if name.endswith(".yaml"):
            for doc in yaml.safe_load_all(text):
                validate(doc, name)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed (optional: issue 8)")
def test_kubectl_client_dry_run_accepts_the_manifests(fake_kube, tmp_path):
    files = bundle(SPEC)
    for name in ("rbac.yaml", "driver.yaml"):
        (tmp_path / name).write_text(files[name])
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n")

    def kubectl(*paths):
        args = ["kubectl", "--server", fake_kube.url, "apply", "--dry-run=client", "--validate=false"]
        for p in paths:
            args += ["-f", str(tmp_path / p)]
        return subprocess.run(args, capture_output=True, text=True, timeout=60)

    ok = kubectl("rbac.yaml", "driver.yaml")
    assert ok.returncode == 0, ok.stderr
    created = [line for line in ok.stdout.splitlines() if line.endswith("created (dry run)")]
    assert len(created) == 16  # 6 RBAC documents + namespace and 9 driver-side documents
    assert "deployment.apps/taxi-driver created (dry run)" in ok.stdout
    assert fake_kube.writes(agent_prefix="") == []  # a client dry run sends nothing
    bad = kubectl("bad.yaml")  # the same check refuses what the API does not serve
    assert bad.returncode != 0 and "Gizmo" in bad.stderr
