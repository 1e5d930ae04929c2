"""Every Spark-on-Kubernetes setting and label we rely on exists in the Spark that pyspark ships: the keys are
read from the compiled `Config` and `Constants` classes of its spark-kubernetes jar (no cluster needed)."""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path

import pyspark
import pytest

from gesscale.k8s.names import SPARK_EXEC_ID_LABEL
from gesscale.k8s.spec import EXECUTOR_CONTAINER, SubmitSpec, spark_conf

_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


def _utf8_constants(data: bytes) -> set[str]:
    """The Utf8 entries of a class file's constant pool (JVM spec §4.4), i.e. its exact string literals."""
    count = struct.unpack_from(">H", data, 8)[0]
    out, pos, index = set(), 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            out.add(data[pos + 3:pos + 3 + length].decode("utf-8", "replace"))
            pos += 3 + length
        else:
            pos += 1 + _SIZES[tag]
        index += 2 if tag in (5, 6) else 1
    return out


def _class_strings(name: str) -> set[str]:
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-kubernetes_*.jar"))
    assert jars, "pyspark ships no spark-kubernetes jar"
    with zipfile.ZipFile(jars[0]) as jar:
        return _utf8_constants(jar.read(f"org/apache/spark/deploy/k8s/{name}.class"))


@pytest.fixture(scope="module")
def config_class() -> set[str]:
    return _class_strings("Config$")


def test_generated_kubernetes_keys_are_known_to_spark(config_class):
    for key in spark_conf(SubmitSpec()):
        if not key.startswith("spark.kubernetes."):
            continue
        # Prefix settings (node selector, labels) are declared by their prefix; a few keys are declared as a
        # prefix constant plus a suffix (spark.kubernetes.authenticate.driver + .serviceAccountName).
        key = re.sub(r"\.(node\.selector|label)\..*$", r".\1.", key)
        cuts = [i for i, c in enumerate(key) if c == "."]
        # (A Scala `s"$PREFIX.suffix"` compiles to the recipe "\x01.suffix", \x01 marking the interpolated value.)
        assert key in config_class or any(
            key[:i] in config_class and ("\x01" + key[i:]) in config_class for i in cuts
        ), key


def test_labels_and_container_name_are_sparks(config_class):
    constants = _class_strings("Constants$")
    assert SPARK_EXEC_ID_LABEL in constants  # the label the backend reads to find an executor's id
    assert EXECUTOR_CONTAINER in constants  # the container the pod template's resources apply to
