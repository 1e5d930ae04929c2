"""The class-data archive's options: used only when the archive is there, named after pyspark and Java."""

from __future__ import annotations

from pathlib import Path

import pyspark

from jobs.cds import archive_path, java_options


def test_options_name_the_archive_only_when_it_exists(tmp_path: Path) -> None:
    archive = tmp_path / "spark.jsa"
    assert java_options(archive) == ""
    archive.write_bytes(b"")
    assert java_options(archive) == ""  # an empty file (an interrupted build) is no archive
    archive.write_bytes(b"x" * 16)
    assert java_options(archive) == f"-XX:SharedArchiveFile={archive}"


def test_the_archive_is_per_pyspark_and_java_version_inside_the_environment() -> None:
    path = archive_path()
    assert path.name.startswith(f"spark-{pyspark.__version__}-java-") and path.suffix == ".jsa"
    assert "unknown" not in path.name  # java -version was readable on this machine
