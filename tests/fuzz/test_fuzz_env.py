"""The `GESSCALE_*` environment variables fuzzed by property: the Kafka and MQTT client security settings
(gesscale/brokers/security.py), the job's hook token (jobs/http_api.py) and the broker binary
(`GESSCALE_TANSU_BIN`). Any value the environment can hold (any text but NUL, undecodable bytes as lone
surrogates) and any file a `*_FILE` variable may name (missing, a folder, a FIFO, /dev/zero, binary, huge) gives
settings a client can use, or one `UserError` line naming the variable; never another exception, never a hang."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz import strategies as s
from tests.fuzz.test_fuzz_inputs import outcome


@pytest.fixture(scope="module")
def env_files(tmp_path_factory: pytest.TempPathFactory, tls_certs: Any) -> dict[str, str]:
    """A path for every file role of `strategies.ENV_FILE_ROLES`."""
    d = tmp_path_factory.mktemp("env-files")
    (d / "ok").write_text("s3cret\n")
    (d / "binary").write_bytes(b"\xff\xfe\x00pw")
    (d / "nul").write_text("pw\x00more")
    (d / "crlf").write_text("pw\r\n")
    (d / "empty").write_text("")
    (d / "huge").write_bytes(b"p" * (2 * 2**20))
    (d / "dir").mkdir()
    os.mkfifo(d / "fifo")
    (d / "unreadable").write_text("pw")
    (d / "unreadable").chmod(0)
    roles = {role: str(d / role) for role in s.ENV_FILE_ROLES if not role.startswith("/")}
    return {**roles, "cert": str(tls_certs.ca), "missing": str(d / "missing"), "/dev/zero": "/dev/zero",
            "/dev/null": "/dev/null"}


def _resolve(env: dict[str, str], files: dict[str, str]) -> dict[str, str]:
    return {k: files[v[1:]] if v.startswith("@") and v[1:] in files else v for k, v in env.items()}


def _usable_text(value: str | None, what: str) -> None:
    """A credential a client can send: encodable, no control character."""
    if value is None:
        return
    value.encode("utf-8")
    assert not any(ord(c) < 32 or ord(c) == 127 for c in value), (what, value)


@given(env=s.env_settings("KAFKA"))
# Found and fixed (each failed before): a control character or an undecodable byte in a user name was taken; a
# FIFO or /dev/zero as the password file hung; a FIFO as the CA file hung the TLS set-up; 'ſsl' was taken as SSL
# (Unicode upper-casing).
@example(env={"GESSCALE_KAFKA_USERNAME": "\x1f"})
@example(env={"GESSCALE_KAFKA_USERNAME": "\udcff"})
@example(env={"GESSCALE_KAFKA_PASSWORD_FILE": "@fifo"})
@example(env={"GESSCALE_KAFKA_PASSWORD_FILE": "/dev/zero"})
@example(env={"GESSCALE_KAFKA_SECURITY_PROTOCOL": "SSL", "GESSCALE_KAFKA_CA_FILE": "@fifo"})
@example(env={"GESSCALE_KAFKA_SECURITY_PROTOCOL": "ſsl"})
@example(env={"GESSCALE_KAFKA_PASSWORD_FILE": "@crlf"})  # kept: 'pw' (as the old reader's newline translation)
def test_fuzz_kafka_security_env(env_files: dict[str, str], env: dict[str, str]) -> None:
    from gesscale.brokers.security import MECHANISMS, PROTOCOLS, KafkaSecurity

    crlf = env.get("GESSCALE_KAFKA_PASSWORD_FILE") == "@crlf" and not env.get("GESSCALE_KAFKA_PASSWORD")
    env = _resolve(env, env_files)
    kind, sec = outcome(lambda: KafkaSecurity.from_env(env))
    if kind == "error":
        assert "GESSCALE_KAFKA_" in sec or "TLS" in sec, sec
        return
    assert not crlf or sec.password == "pw"  # a file written on Windows: its line break is not the password's
    raw = env.get("GESSCALE_KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT"
    assert sec.protocol in PROTOCOLS and sec.mechanism in MECHANISMS
    assert raw.isascii(), f"{raw!r} taken as {sec.protocol}"
    _usable_text(sec.username, "username")
    _usable_text(sec.password, "password")
    if sec.sasl:
        assert sec.username and sec.password
    assert "SECRET" not in repr(sec) + sec.describe()
    sec.client_config()
    outcome(sec.ssl_context)


@given(env=s.env_settings("MQTT"))
# Found and fixed: an empty password file gave the password '' (taken, without a user name); a FIFO as the
# client certificate hung the TLS set-up.
@example(env={"GESSCALE_MQTT_PASSWORD_FILE": "@empty"})
@example(env={"GESSCALE_MQTT_TLS": "1", "GESSCALE_MQTT_CERT_FILE": "@fifo"})
def test_fuzz_mqtt_security_env(env_files: dict[str, str], env: dict[str, str]) -> None:
    from gesscale.brokers.security import MqttSecurity, _context

    env = _resolve(env, env_files)
    kind, sec = outcome(lambda: MqttSecurity.from_env(env))
    if kind == "error":
        assert "GESSCALE_MQTT_" in sec or "TLS" in sec, sec
        return
    _usable_text(sec.username, "username")
    _usable_text(sec.password, "password")
    assert sec.password is None or sec.username
    assert "SECRET" not in repr(sec) + sec.describe()
    if sec.tls:
        outcome(lambda: _context(sec.cafile, sec.certfile, sec.keyfile))


@given(value=s.ENV_TEXTS | st.sampled_from(["@ok", "@dir", "@fifo", "@missing", "/bin/true", "/dev/null"]))
@example(value="0")  # found and fixed: any text was taken as the binary (the error came later, at the spawn)
def test_fuzz_tansu_bin(env_files: dict[str, str], monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """`GESSCALE_TANSU_BIN` names the broker binary: an executable file, or one line naming the variable."""
    from gesscale.brokers.kafka import kafka_argv

    value = _resolve({"v": value}, env_files)["v"]
    monkeypatch.setenv("GESSCALE_TANSU_BIN", value)
    monkeypatch.setattr("shutil.which", lambda _name: None)
    kind, argv = outcome(lambda: kafka_argv("tansu", 9092, Path("/tmp/unused")))
    if kind == "ok":
        assert value and os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK), (value, argv[0])
    else:
        assert "GESSCALE_TANSU_BIN" in argv, argv


@given(token=s.ENV_TEXTS | st.sampled_from(["tok-123", "a b", "ü-token", "Bearer x"]))
# Found and fixed: a token no client can send (not latin-1; an outer space, which the header loses) was taken;
# every hook request then got 401.
@example(token="Ā")
@example(token=" tok")
def test_fuzz_job_token(token: str) -> None:
    """`GESSCALE_JOB_TOKEN`: a token the hook's clients can send in a header and that then matches, or refused
    when the driver starts (one line naming the variable)."""
    from jobs.http_api import BEARER, DriverApi

    kind, api = outcome(lambda: DriverApi(lambda: None, lambda: b"", object(), token))  # type: ignore[arg-type]
    if kind == "error":
        assert "GESSCALE_JOB_TOKEN" in api, api
        return
    if api.token is None:
        assert not token
        return
    header = f"{BEARER}{api.token}".encode("latin-1", "strict").decode("latin-1")  # what http.server gives back
    assert api._authorised(header) is None
    assert api._authorised(f"{BEARER}{api.token}x") is not None


def test_the_env_roles_are_all_mapped(env_files: dict[str, Any]) -> None:
    assert set(s.ENV_FILE_ROLES) <= set(env_files)


@given(token=s.ENV_TEXTS | st.sampled_from(["0123456789abcdef", "0123456789abcde\n", "SECRET-0123456789"]))
def test_fuzz_k3s_token(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    """`GESSCALE_K3S_TOKEN`, which the inventories read with an env lookup: `provision --plan` says whether it is
    set, missing or too short, in one line that never shows it (the k3s template quotes it with to_json)."""
    from netem.provision_plan import _token, _Values

    monkeypatch.setenv("GESSCALE_K3S_TOKEN", token)
    line = _token(_Values(None, {"k3s_token": "{{ lookup('ansible.builtin.env', 'GESSCALE_K3S_TOKEN') }}"}))
    assert "\n" not in line and "SECRET" not in line
    assert line.startswith("token ") and ("MISSING" in line) == (not token) and ("TOO SHORT" in line) == (
        0 < len(token) < 16)


@given(value=st.one_of(st.text(max_size=60),
                       st.lists(st.sampled_from(["png", "svg", "pdf", "PNG", " pdf", "jpeg", "", "ſvg"]),
                                max_size=5).map(",".join)))
def test_fuzz_figure_formats(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """GESSCALE_FIGURE_FORMATS: a subset of png, svg, pdf that holds png (in that order), or one line naming the
    variable."""
    from gesscale.figures import FORMATS, FORMATS_ENV, formats

    if "\x00" in value:
        return  # the environment cannot hold NUL
    monkeypatch.setenv(FORMATS_ENV, value)
    kind, got = outcome(formats)
    if kind == "ok":
        assert got[0] == "png" and set(got) <= set(FORMATS) and list(got) == [f for f in FORMATS if f in got]
    else:
        assert got.startswith(FORMATS_ENV), got
