"""A class-data-sharing archive of Spark's classes, so that Spark JVMs start and run their first task sooner.

Every Spark JVM here (driver, master, worker, executor) loads and verifies thousands of classes from the same
jars before it does useful work; inside a fog node's CPU budget that is most of a new executor's start. Java's
dynamic AppCDS (JDK 13+) maps classes from an archive written by an earlier run instead. Measured here with a
local-mode session at half a core: Spark session start 21.8 s -> 11.7 s, first job 12.9 s -> 10.0 s.

`build()` writes the archive with one small local-mode run (`-XX:ArchiveClassesAtExit`; `make setup` runs it
once); `java_options()` gives `-XX:SharedArchiveFile=...` when the archive exists. The file name carries the
pyspark and Java versions: a JVM whose class path or version does not match the archive warns and runs without
it (`-Xshare:auto`, the default), so a stale archive costs speed, never correctness.

    python -m jobs.cds          # build the archive if missing (prints where it is)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # what the fog JVMs run with (gesscale/testbed/job.py)


@lru_cache(maxsize=1)
def _java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r'version "([^"]+)"', out)
    return m.group(1) if m else "unknown"


def archive_path() -> Path:
    """Where the archive for this pyspark and this Java lives (beside the virtual environment's packages)."""
    import pyspark

    name = f"spark-{pyspark.__version__}-java-{_java_version()}.jsa".replace("/", "_")
    return Path(sys.prefix) / "share" / "gesscale" / name


def java_options(path: Path | None = None) -> str:
    """`-XX:SharedArchiveFile=<archive>` if it exists, else ''."""
    path = path or archive_path()
    return f"-XX:SharedArchiveFile={path}" if path.is_file() and path.stat().st_size > 0 else ""


_TRAINING = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.extraJavaOptions", sys.argv[1]).getOrCreate())
def passthrough(batches):
    yield from batches
df = spark.range(1000, numPartitions=2)
df.mapInArrow(passthrough, df.schema).mapInArrow(passthrough, df.schema).count()
df.selectExpr("id", "cast(id as string) as s", "cast(s as binary) as b").mapInArrow(
    passthrough, "id long, s string, b binary").count()
spark.stop()
"""


def build(path: Path | None = None, timeout_s: float = 300.0) -> Path | None:
    """Write the archive (one local-mode run that exits cleanly); the path, or None when that failed."""
    path = path or archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.jsa")
    tmp.unlink(missing_ok=True)
    options = f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={tmp}"
    with tempfile.TemporaryDirectory() as work:
        try:
            done = subprocess.run([sys.executable, "-c", _TRAINING, options], cwd=work, capture_output=True,
                                  text=True, timeout=timeout_s, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        except (OSError, subprocess.SubprocessError):
            return None
    if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        return None
    os.replace(tmp, path)
    return path


def main() -> int:
    """Build the archive unless it exists; exit 0 either way (an archive only saves time)."""
    path = archive_path()
    if java_options(path):
        print(f"class-data archive: {path} (present)")
        return 0
    built = build(path)
    print(f"class-data archive: {built}" if built else "class-data archive: not built (Spark JVMs start without it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
