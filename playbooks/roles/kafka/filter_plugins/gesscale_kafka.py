"""Jinja filter of the kafka role: the `kafka-storage.sh format --add-scram` arguments of the SCRAM users.

Kafka parses `SCRAM-SHA-512=[name=N,password=P]` itself, with `,`, `[`, `]` and `=` as separators and no
escaping: a name or password holding one of them (or a quote or a space) is refused here, with the user's
name and never the password, rather than cut at the separator on the broker.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

SAFE = re.compile(r"^[A-Za-z0-9._~+/@:-]+$")


def gesscale_kafka_scram_args(users: list) -> list[str]:
    """['--add-scram', 'SCRAM-SHA-512=[name=...,password=...]', ...] for each user {name, password}."""
    args: list[str] = []
    for user in users or []:
        name, password = str(user.get("name", "")), str(user.get("password", ""))
        if not SAFE.match(name):
            raise AnsibleFilterError(f"kafka_sasl_users: name {name!r}: use letters, digits and . _ ~ + / @ : -")
        if not SAFE.match(password):
            raise AnsibleFilterError(f"kafka_sasl_users: the password of {name} holds a character Kafka's "
                                     "--add-scram cannot carry (use letters, digits and . _ ~ + / @ : -)")
        args += ["--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"]
    return args


class FilterModule:
    """Registers the kafka role's filter with Ansible."""

    def filters(self) -> dict:
        """Filter name -> function."""
        return {"gesscale_kafka_scram_args": gesscale_kafka_scram_args}
