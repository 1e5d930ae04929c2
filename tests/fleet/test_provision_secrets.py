"""Secrets reach `gesscale provision` by file only: a secret-looking `-e` is refused with one line, a plain
secrets file others can read is refused, a vault file or a 0600 file is taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from netem.secrets import check_secrets_file, looks_secret

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("pair", "secret"), [
    (("k3s_token", "abc"), True), (("kafka_sasl_users", "[]"), True), (("mqtt_users", "[]"), True),
    (("vault_mqtt_password", "x"), True), (("api_secret", "x"), True), (("kafka_tls_private_key", "x"), True),
    (("extra", '{"password": "x"}'), True),
    (("raspberrypi_force", "true"), False), (("ansible_ssh_private_key_file", "~/.ssh/id"), False),
    (("kafka_tls_key_file", "tls/pi02.key"), False), (("kafka_security_protocol", "SASL_SSL"), False),
])  # fmt: skip
def test_secret_looking_extras(pair, secret):
    assert looks_secret(*pair) is secret


def test_provision_refuses_a_secret_on_the_command_line(capsys):
    code = main(["provision", "-i", str(ROOT / "inventory" / "pi10"), "--plan", "-e", "k3s_token=s3cr3t-value"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "looks like a secret" in err and "--secrets-file" in err and "s3cr3t-value" not in err


def test_secrets_file_modes(tmp_path):
    plain = tmp_path / "secrets.yml"
    plain.write_text("k3s_token: abc\n")
    plain.chmod(0o644)
    with pytest.raises(UserError, match="readable by others"):
        check_secrets_file(plain)
    plain.chmod(0o600)
    check_secrets_file(plain)
    vault = tmp_path / "vault.yml"
    vault.write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    vault.chmod(0o644)
    check_secrets_file(vault)  # encrypted: any mode
    with pytest.raises(UserError, match="not found"):
        check_secrets_file(tmp_path / "absent.yml")
    code = main(["provision", "-i", str(ROOT / "inventory" / "pi10"), "--plan", "--secrets-file", str(tmp_path / "x")])
    assert code == 2
