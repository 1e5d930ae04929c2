"""The secured Spark configuration of a testbed run (jobs/spark_security.py): its text, the file's modes, the
environment a daemon gets."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

from jobs import spark_security


def test_defaults_hold_every_setting_and_the_secret() -> None:
    text = spark_security.defaults_text("abc123")
    settings = dict(line.split(" ", 1) for line in text.splitlines())
    assert settings == {**spark_security.SECURE_SETTINGS, "spark.authenticate.secret": "abc123"}
    assert settings["spark.authenticate"] == "true" and settings["spark.master.rest.enabled"] == "false"
    assert settings["spark.ui.killEnabled"] == "false"


@pytest.mark.parametrize("bad", ["", "two words", "line\nbreak"])
def test_a_secret_that_would_break_the_file_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        spark_security.defaults_text(bad)


def test_create_writes_a_fresh_secret_readable_by_its_owner_only(tmp_path: Path) -> None:
    assert spark_security.existing(tmp_path) is None
    folder = spark_security.create(tmp_path)
    assert spark_security.existing(tmp_path) == folder
    path = folder / spark_security.DEFAULTS_FILE
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.read_text()
    spark_security.create(tmp_path)  # a new run: a new secret
    assert path.read_text() != first and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_bind_env_binds_the_ui_and_points_at_the_conf_only_when_secured(tmp_path: Path) -> None:
    assert spark_security.bind_env("127.0.0.31", None) == {"SPARK_LOCAL_IP": "127.0.0.31"}
    conf = tmp_path / "a b"  # a path with a space stays one argument
    env = spark_security.bind_env("127.0.0.1", conf)
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and "SPARK_CONF_DIR" not in env  # see the module docstring
    assert shlex.split(env["PYSPARK_SUBMIT_ARGS"]) == ["--properties-file", str(conf / "spark-defaults.conf"),
                                                       "pyspark-shell"]
    assert spark_security.daemon_args(None) == []
    assert spark_security.daemon_args(conf) == ["--properties-file", str(conf / "spark-defaults.conf")]
