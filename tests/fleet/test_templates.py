"""Templates that cannot run here (k3s, Kafka, RBAC), rendered by Ansible from the pi10 inventory and checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOKEN = "render-test-token-0123456789"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", GESSCALE_K3S_TOKEN=TOKEN,
               ANSIBLE_ROLES_PATH=str(ROOT / "playbooks" / "roles"), ANSIBLE_NOCOLOR="1")  # fmt: skip
    res = subprocess.run(
        [BIN / "ansible-playbook", "-i", ROOT / "inventory" / "pi10", Path(__file__).with_name("render_templates.yml"),
         "--tags", "render", "-e", f"render_dir={out}", "-e", f"ansible_python_interpreter={sys.executable}"],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    return out


def test_k3s_config_carries_token_addresses_and_node_labels(rendered):
    server = yaml.safe_load((rendered / "pi01.config.yaml").read_text())
    assert server["token"] == TOKEN
    assert server["node-ip"] == "192.168.50.101" and server["tls-san"] == ["192.168.50.101"]
    assert "server" not in server
    assert set(server["node-label"]) == {
        "gesscale.io/region=umea", "gesscale.io/lat=63.826N", "gesscale.io/lon=20.263E",
        "gesscale.io/cpu-budget=1.0", "gesscale.io/arch=arm64",
    }  # fmt: skip
    london = yaml.safe_load((rendered / "pi07.config.yaml").read_text())
    assert london["server"] == "https://192.168.50.101:6443"
    assert "gesscale.io/lon=0.128W" in london["node-label"]
    sydney = yaml.safe_load((rendered / "pi10.config.yaml").read_text())
    assert "gesscale.io/lat=33.869S" in sydney["node-label"] and "gesscale.io/lon=151.209E" in sydney["node-label"]
    label_value = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"  # Kubernetes label value syntax
    for host in [f"pi{i:02d}" for i in range(1, 11)]:
        labels = yaml.safe_load((rendered / f"{host}.config.yaml").read_text())["node-label"]
        for label in labels:
            assert re.match(label_value, label.split("=", 1)[1]), label


def test_k3s_units_follow_the_groups_and_the_pinned_version(rendered):
    assert "ExecStart=/usr/local/bin/k3s server" in (rendered / "pi01.k3s.service").read_text()
    agent = (rendered / "pi05.k3s.service").read_text()
    assert "ExecStart=/usr/local/bin/k3s agent" in agent and "v1.31.4+k3s1" in agent


def test_kafka_runs_kraft_with_topics_sized_to_max_executors(rendered):
    props = dict(
        line.split("=", 1) for line in (rendered / "pi02.server.properties").read_text().splitlines()
        if line and not line.startswith("#")
    )  # fmt: skip
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@192.168.50.102:9093"
    assert props["listeners"] == "PLAINTEXT://192.168.50.102:9092,CONTROLLER://192.168.50.102:9093"
    assert props["num.partitions"] == "8"  # gesscale_max_executors in inventory/pi10
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["auto.create.topics.enable"] == "false"
    assert not (rendered / "pi03.server.properties").exists()


def test_spark_rbac_is_least_privilege(rendered):
    manifest = (rendered / "spark-rbac.yaml").read_text()
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(manifest)}
    assert ("Namespace", "spark") in docs
    driver = docs[("Role", "spark-driver")]
    assert driver["metadata"]["namespace"] == "spark"
    assert {r for rule in driver["rules"] for r in rule["resources"]} == {"pods", "configmaps",
                                                                          "persistentvolumeclaims"}
    controller = docs[("Role", "gesscale-controller")]
    assert controller["metadata"]["namespace"] == "spark"
    assert controller["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["gesscale-job-driver"],
         "verbs": ["get", "patch"]},
    ]
    nodes = docs[("ClusterRole", "gesscale-controller-nodes")]
    assert nodes["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}]
    # one source: the role applies exactly what `gesscale k8s submit` writes to manifests/ (RBAC documents)
    shipped = [d for name in ("rbac.yaml", "driver.yaml")
               for d in yaml.safe_load_all((ROOT / "manifests" / name).read_text())
               if d["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                                "ClusterRoleBinding")]
    assert len(shipped) == 10
    for doc in shipped:
        assert docs[(doc["kind"], doc["metadata"]["name"])] == doc
    assert not any(d["kind"] == "ClusterRole" and "pods" in str(d) for d in docs.values())
    accounts = {(k, d["metadata"]["name"]): d["metadata"]["namespace"] for (k, _), d in docs.items()
                if k == "ServiceAccount"}
    assert accounts == {("ServiceAccount", "spark-driver"): "spark",
                        ("ServiceAccount", "gesscale-controller"): "gesscale-system"}
    for (k, _), doc in docs.items():
        if k in ("RoleBinding", "ClusterRoleBinding"):
            (subject,) = doc["subjects"]
            assert subject["kind"] == "ServiceAccount"
            assert subject["namespace"] == accounts[("ServiceAccount", subject["name"])]


def test_spark_rbac_fits_the_openapi_schema_of_the_k3s_it_goes_to(rendered):
    import kubernetes_validate

    version = re.fullmatch(r"v(\d+\.\d+)\.\d+\+k3s\d+",
                           yaml.safe_load((ROOT / "playbooks/roles/k3s/defaults/main.yml").read_text())["k3s_version"])
    assert version, "k3s_version"
    docs = [d for d in yaml.safe_load_all((rendered / "spark-rbac.yaml").read_text()) if d]
    assert len(docs) >= 8
    for doc in docs:  # strict: a field the schema lacks is an error (offline: schemas ship in the wheel)
        kubernetes_validate.validate(doc, f"{version.group(1)}.0", strict=True)
