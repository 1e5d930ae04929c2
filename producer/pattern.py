"""Parse `--pattern` into a workload spec of gesscale.workloads (the simulator's shapes), pure apart from
reading a scenario file.

Accepted forms:
- `cosine,mean=500,amplitude=300,period_s=600` — kind, then key=value pairs; a value with `:` is a list
  (`steps,levels=1000:3000:2000,step_s=10`);
- a scenario YAML file (its `workload:` mapping), so a live run replays exactly the input of a simulated one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.workloads import WORKLOAD_KINDS


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_pattern(text: str) -> dict[str, Any]:
    """The workload spec named by `text` (see module doc); UserError when it is not one."""
    path = Path(text)
    if path.suffix in (".yaml", ".yml"):
        return _from_yaml(path)
    kind, *pairs = [p.strip() for p in text.split(",") if p.strip()] or [""]
    if kind not in WORKLOAD_KINDS:
        raise UserError(f"unknown pattern {kind!r}; expected one of {', '.join(WORKLOAD_KINDS)} or a scenario YAML")
    spec: dict[str, Any] = {"kind": kind}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"pattern option {pair!r} is not key=value")
        value = value.strip()
        spec[key.strip()] = [_number(v) for v in value.split(":")] if ":" in value else _number(value)
    return spec


def _from_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"pattern file not found: {path}") from None
    except (OSError, yaml.YAMLError) as err:
        raise UserError(f"cannot read pattern file {path}: {err}") from None
    spec = data.get("workload", data) if isinstance(data, dict) else None
    if not isinstance(spec, dict) or "kind" not in spec:
        raise UserError(f"{path}: no workload mapping with a 'kind' (a scenario's `workload:` section)")
    return dict(spec)


def constant_rate(rate: float, duration_s: int) -> dict[str, Any]:
    """The spec of a constant rate (`--rate`): one step held for the whole duration."""
    if rate <= 0 or duration_s <= 0:
        raise UserError("--rate and --duration must be positive")
    return {"kind": "steps", "levels": [rate], "step_s": duration_s}
