"""The one rule for names: a declared pattern per kind of name, and the one check every reader calls.

A name given by a user (a map node, an inventory host, a scenario, an image...) ends up in a file name, a shell
script run as root, a rendered configuration file or a command line. Quoting protects a shell but not a path
(`../`), a line-oriented file (a newline) nor a comment line of a script, so every such name is checked here,
when it is read and before anything is written, against a pattern that admits only what the name can
legitimately be. The patterns are the contract (docs/security.md, "Names"); environments (netem/, the
playbooks' filters, the testbed, the experiment bundles) import this module, the core needs nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gesscale.errors import UserError

# A name in a file name, a shell word or a config line: a letter or digit first (so never '.', '..' or an
# option such as '-rf'), then letters, digits, '.', '_' and '-', 63 characters at most (a DNS label's length).
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
# A Kubernetes label value (k3s labels a node with its region): letters or digits at both ends, 63 at most.
_LABEL_VALUE = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"
# A container image reference: [registry[:port]/]path[:tag][@sha256:digest] (the OCI distribution grammar,
# lower-case path components, without its rarely used corners).
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_IMAGE = (
    rf"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{{0,252}}[A-Za-z0-9])?(?::[0-9]{{1,5}})?/)?"
    rf"{_COMPONENT}(?:/{_COMPONENT}){{0,15}}"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)

PATTERNS: dict[str, str] = {
    "host": _NAME,  # inventory host names (the tc script, SSH, the playbooks' config files)
    "group": _NAME,  # inventory group names (playbook host patterns)
    "node": _NAME,  # latency map nodes (they are inventory hosts on the Pis, fog node folders locally)
    "region": _LABEL_VALUE,  # map and inventory regions (a k3s node label)
    "device": r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}",  # Linux interfaces: 15 bytes at most (IFNAMSIZ - 1), no '/'
    "tag": r"[A-Za-z0-9][A-Za-z0-9_-]{0,19}",  # the testbed's WAN chain tags ("GS-" + tag: a chain has 28 at most)
    "scenario": _NAME,  # a scenario's `name` (time series and figure file names)
    "experiment": _NAME,  # an experiment's `name` (the bundle's report)
    "policy": _NAME,  # policy ids, built in or plug-in (bundle and time series file names)
    "image": _IMAGE,  # container images (`--image`, rendered into manifests)
}
# How a message states a pattern too long to read in one line.
STATED = {"image": "[registry[:port]/]path[:tag][@sha256:digest], the path in lower case"}
_COMPILED = {kind: re.compile(pattern) for kind, pattern in PATTERNS.items()}
_IMAGE_MAX = 255  # the longest image reference we pass on (the registries' own limit is of that order)
SHOWN_MAX = 80  # an error message shows at most this many characters of the offending value


def shown(value: Any) -> str:
    """`repr(value)`, cut at about 80 characters: a newline shows as \\n, a megabyte stays out of the message."""
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 3] + "..."


def is_name(kind: str, value: Any) -> bool:
    """Whether `value` is a string matching the pattern of `kind` (a key of `PATTERNS`)."""
    if not isinstance(value, str) or (kind == "image" and len(value) > _IMAGE_MAX):
        return False
    return _COMPILED[kind].fullmatch(value) is not None


def check_name(kind: str, value: Any, field: str) -> str:
    """`value` if it is a valid name of `kind`, else one `UserError` line naming `field` and the pattern.

    `field` says where the name was read, as the user would find it (`map.yaml: node`, `--image`).
    """
    if not is_name(kind, value):
        expected = STATED.get(kind, PATTERNS[kind])
        raise UserError(f"{field}: {shown(value)} is not a valid {kind} name (expected {expected})")
    return value


def inside(folder: str | Path, name: str) -> Path:
    """`folder / name`, refused unless it resolves inside `folder` (a second guard behind the name rule)."""
    base = Path(folder).resolve()
    path = (base / name).resolve()
    if path.parent != base and base not in path.parents:
        raise UserError(f"{shown(name)} would be written outside {base}")
    return Path(folder) / name
