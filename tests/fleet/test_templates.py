"""Templates that cannot run here (k3s, Kafka, RBAC), rendered by Ansible from the pi10 inventory and checked."""

from __future__ import annotations

import importlib.util
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


SCRAM_PASSWORD = "render-scram-0123456789"


def _render(out: Path, *extra: str) -> Path:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", GESSCALE_K3S_TOKEN=TOKEN,
               ANSIBLE_ROLES_PATH=str(ROOT / "playbooks" / "roles"), ANSIBLE_NOCOLOR="1")  # fmt: skip
    res = subprocess.run(
        [BIN / "ansible-playbook", "-i", ROOT / "inventory" / "pi10", Path(__file__).with_name("render_templates.yml"),
         "--tags", "render", "-e", f"render_dir={out}", "-e", f"ansible_python_interpreter={sys.executable}",
         *extra],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert SCRAM_PASSWORD not in res.stdout + res.stderr  # rendering a secret never prints it
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    secrets = out / "secrets.yml"  # the SCRAM users of the secured Kafka variants, by file as on a rack
    secrets.write_text(yaml.safe_dump({"render_sasl_users": [{"name": "broker", "password": SCRAM_PASSWORD},
                                                             {"name": "producer", "password": SCRAM_PASSWORD + "p"}]}))
    return _render(out, "-e", f"@{secrets}")


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


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
    # one source: the role applies exactly what `gesscale k8s render` writes to manifests/ (RBAC documents)
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


def test_kafka_and_mosquitto_keep_todays_defaults(rendered):
    props = _properties(rendered / "pi02.server.properties")
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert not any(k.startswith(("ssl.", "sasl.")) for k in props)
    assert _properties(rendered / "pi02.admin.properties") == {"security.protocol": "PLAINTEXT"}
    conf = (rendered / "pi03.mosquitto.conf").read_text()
    assert "listener 1883 192.168.50.103" in conf and "8883" not in conf and "allow_anonymous false" in conf


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_kafka_sasl_and_tls_and_mosquitto_tls_render(rendered, protocol):
    out = rendered
    props = _properties(out / f"pi02.{protocol}.server.properties")
    assert props["listeners"] == f"{protocol}://192.168.50.102:9092,CONTROLLER://192.168.50.102:9093"
    assert props["advertised.listeners"] == f"{protocol}://192.168.50.102:9092"
    assert props["inter.broker.listener.name"] == protocol
    assert props["listener.security.protocol.map"] == f"CONTROLLER:SSL,{protocol}:{protocol}"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    assert props["ssl.keystore.location"] == "/etc/kafka/tls/server.pem"
    assert props["ssl.truststore.location"] == "/etc/kafka/tls/ca.pem"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["ssl.endpoint.identification.algorithm"] == "https"
    admin = _properties(out / f"pi02.{protocol}.admin.properties")
    assert admin["security.protocol"] == protocol
    if protocol == "SASL_SSL":
        assert props["sasl.enabled.mechanisms"] == props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
        jaas = props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
        assert jaas == ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                        f'password="{SCRAM_PASSWORD}";')  # the first user is the brokers' own
        assert admin["sasl.jaas.config"] == jaas and admin["sasl.mechanism"] == "SCRAM-SHA-512"
        assert "ssl.client.auth" not in props  # clients authenticate by password
    else:
        assert props["ssl.client.auth"] == "required"  # no passwords: clients authenticate by certificate
        assert not any(k.startswith("sasl.") for k in props) and SCRAM_PASSWORD not in str(props)
        assert admin["ssl.keystore.location"] == "/etc/kafka/tls/server.pem"
    conf = (out / "pi03.tls.mosquitto.conf").read_text().splitlines()
    assert "listener 8883 192.168.50.103" in conf and not any(line.startswith("listener 1883") for line in conf)
    tls = conf[conf.index("listener 8883 192.168.50.103") + 1:]
    assert tls[:4] == ["cafile /etc/mosquitto/tls/ca.crt", "certfile /etc/mosquitto/tls/server.crt",
                       "keyfile /etc/mosquitto/tls/server.key", "tls_version tlsv1.2"]
    assert "allow_anonymous false" in conf


def _filter(module: str, name: str):
    spec = importlib.util.spec_from_file_location(module, ROOT / "playbooks" / "roles" / "kafka" / "filter_plugins"
                                                  / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def test_scram_users_become_add_scram_arguments_and_unsafe_ones_are_refused():
    from ansible.errors import AnsibleFilterError

    scram = _filter("gesscale_kafka", "gesscale_kafka_scram_args")
    assert scram([{"name": "broker", "password": "p4ss.word-0123"}]) == [
        "--add-scram", "SCRAM-SHA-512=[name=broker,password=p4ss.word-0123]"]
    with pytest.raises(AnsibleFilterError, match="password of broker") as err:
        scram([{"name": "broker", "password": "a,b]c=d"}])
    assert "a,b]c=d" not in str(err.value)


# Variables holding secrets in our roles, and the marks of a secret inside a template.
SECRET = re.compile(r"k3s_token|password|kafka_sasl_users|_key_file|scram|jaas")


def _tasks(items: list, where: str):
    for task in items or []:
        yield where, task
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from _tasks(task[key], where)


def test_every_task_that_touches_a_secret_has_no_log():
    """Scan every task of every role and playbook: a task whose arguments (or template) refer to a secret
    variable must carry no_log: true (a template's --diff, a loop item, an argv or an assert would show it)."""
    files = [*sorted((ROOT / "playbooks").glob("*.yml")), *sorted((ROOT / "playbooks" / "roles").glob("*/tasks/*.yml"))]
    checked, missing = 0, []
    for path in files:
        doc = yaml.safe_load(path.read_text()) or []
        plays = [p for p in doc if "tasks" in p or "pre_tasks" in p] if "hosts" in str(doc[:1]) else [{"tasks": doc}]
        for play in plays:
            tasks = [*play.get("pre_tasks", []), *play.get("tasks", [])]
            for where, task in _tasks(tasks, str(path.relative_to(ROOT))):
                if "block" in task:
                    continue  # its tasks are checked one by one
                text = yaml.safe_dump({k: v for k, v in task.items() if k not in ("name", "no_log")})
                module = next((task[k] for k in ("ansible.builtin.template", "template") if k in task), None)
                if module:
                    role_dir = path.parents[1]
                    text += (role_dir / "templates" / module["src"]).read_text() if (
                        role_dir / "templates" / module["src"]).is_file() else ""
                if SECRET.search(text.replace("password_file", "")):  # a path, not a secret
                    checked += 1
                    if task.get("no_log") is not True:
                        missing.append(f"{where}: {task.get('name')}")
    assert missing == []
    assert checked >= 10  # the k3s token's assert and config, mosquitto's users, Kafka's SCRAM and TLS tasks
