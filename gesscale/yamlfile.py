"""Read a user's YAML file; a missing, unreadable or malformed file is one `UserError` naming it.

A key given twice in one mapping is an error, not "the last one wins" (PyYAML's default): in a latency map or a
scenario, a pair or an option listed twice is a mistake whose silent resolution would change the experiment.
Keys brought in by a YAML merge (`<<: *anchor`) may still be overridden, as YAML intends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gesscale.errors import UserError


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names the same key twice (reported with the line of the second one)."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that repeats a key."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class reports it
                break
            if duplicate:
                raise DuplicateKeyError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> Any:
    """Parse one YAML document with the safe loader, a repeated key being an error (`DuplicateKeyError`)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed document of `path`; `what` names the kind of file in error messages ("scenario", ...)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise UserError(f"{what} not found: {p}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {p} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file ({what} files are YAML)") from None
    except OSError as err:
        raise UserError(f"cannot read {what} {p}: {err.strerror}") from None
    try:
        return parse_yaml(text)
    except DuplicateKeyError as err:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}: {err.problem}{where} (each key may appear once in a mapping)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}: malformed YAML{where}") from None
