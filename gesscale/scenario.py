"""Scenario files for the simulator (YAML, shared/DESIGN.md §4): cluster, ground truth, workload, seed.

The ground truth (alpha, beta, gamma, noise, reconfiguration pause) is what the simulated operator really
does; policies never see it (only the `ideal` oracle reads the demand derived from it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.workloads import WORKLOAD_KINDS
from gesscale.yamlfile import read_yaml
from netem.latency_map import LatencyMap, latency_map_from_dict, load_latency_map


@dataclass(frozen=True)
class GroundTruth:
    """How the simulated operator really behaves (unknown to the policies)."""

    alpha: float = 60.0
    beta: float = 0.9
    gamma: float = 0.1
    noise: float = 0.03
    reconfig_pause_s: float = 120.0
    initial_replicas: int = 2

    def mst(self, n: int, nd_max_ms: float) -> float:
        """True MST of n replicas at ND_max (records/s), without noise."""
        if n < 1:
            return 0.0
        return max(0.0, self.alpha * n**self.beta - self.gamma * nd_max_ms)


@dataclass(frozen=True)
class Scenario:
    """One simulated experiment: cluster, operator ground truth, workload and seed."""

    name: str
    latency_map: LatencyMap
    truth: GroundTruth
    workload: dict[str, Any]
    control_period_s: float = 60.0
    min_replicas: int = 1
    max_replicas: int = 8
    warmup_s: float | None = None
    seed: int = 1
    source: str = "<inline>"
    extra: dict[str, Any] = field(default_factory=dict)

    def with_seed(self, seed: int) -> Scenario:
        """The same scenario with another seed."""
        return replace(self, seed=seed)


def _num(data: Mapping[str, Any], key: str, default: Any, where: str, *, minimum: float = 0.0) -> Any:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: '{key}' must be a number, got {value!r}")
    if value < minimum:
        raise UserError(f"{where}: '{key}' must be >= {minimum}, got {value}")
    return value


def _find(ref: str, scenario_path: Path) -> Path:
    """Resolve a path named in a scenario: beside the file, in any folder above it, or from the CWD."""
    p = Path(ref)
    if p.is_absolute():
        return p
    for base in [scenario_path.parent, *scenario_path.resolve().parents, Path.cwd()]:
        if (base / p).exists():
            return base / p
    return p


def scenario_from_dict(data: Any, source: str = "<inline>", path: Path | None = None) -> Scenario:
    """Validate a parsed scenario; every problem is a `UserError` naming the file and key."""
    where = source
    if not isinstance(data, Mapping):
        raise UserError(f"{where}: a scenario must be a mapping (name, cluster, operator, workload)")
    cluster = data.get("cluster")
    if not isinstance(cluster, Mapping):
        raise UserError(f"{where}: missing 'cluster' (latency_map or nodes + rtt_ms, min/max_replicas)")
    if "latency_map" in cluster:
        ref = cluster["latency_map"]
        if isinstance(ref, Mapping):
            lmap = latency_map_from_dict(ref, f"{where}: cluster.latency_map")
        else:
            lmap = load_latency_map(_find(str(ref), path or Path(source)))
    elif "nodes" in cluster:
        lmap = latency_map_from_dict(cluster, f"{where}: cluster", other_keys=("min_replicas", "max_replicas"))
    else:
        raise UserError(f"{where}: cluster needs 'latency_map' (file) or inline 'nodes' and 'rtt_ms'")

    op = data.get("operator") or {}
    if not isinstance(op, Mapping):
        raise UserError(f"{where}: 'operator' must be a mapping of ground-truth values")
    truth = GroundTruth(
        alpha=float(_num(op, "alpha", 60.0, f"{where}: operator", minimum=1e-9)),
        beta=float(_num(op, "beta", 0.9, f"{where}: operator", minimum=1e-9)),
        gamma=float(_num(op, "gamma", 0.1, f"{where}: operator")),
        noise=float(_num(op, "noise", 0.03, f"{where}: operator")),
        reconfig_pause_s=float(_num(op, "reconfig_pause_s", 120.0, f"{where}: operator")),
        initial_replicas=int(_num(op, "initial_replicas", 2, f"{where}: operator", minimum=1)),
    )
    workload = data.get("workload")
    if workload is None:
        raise UserError(f"{where}: missing 'workload' (kind: {' | '.join(WORKLOAD_KINDS)})")
    if not isinstance(workload, Mapping) or workload.get("kind") not in WORKLOAD_KINDS:
        kind = workload.get("kind") if isinstance(workload, Mapping) else workload
        raise UserError(f"{where}: workload kind {kind!r} unknown; expected one of {', '.join(WORKLOAD_KINDS)}")
    workload = dict(workload)
    if workload["kind"] == "csv" and "path" in workload:
        workload["path"] = str(_find(str(workload["path"]), path or Path(source)))

    min_r = int(_num(cluster, "min_replicas", 1, f"{where}: cluster", minimum=1))
    max_r = int(_num(cluster, "max_replicas", len(lmap.names), f"{where}: cluster", minimum=1))
    if max_r < min_r:
        raise UserError(f"{where}: cluster.max_replicas ({max_r}) < min_replicas ({min_r})")
    if max_r > len(lmap.names):
        raise UserError(f"{where}: cluster.max_replicas ({max_r}) exceeds the {len(lmap.names)} nodes of the map")
    if truth.initial_replicas > max_r:
        raise UserError(f"{where}: operator.initial_replicas ({truth.initial_replicas}) > max_replicas ({max_r})")
    warmup = data.get("warmup_s")
    return Scenario(
        name=str(data.get("name") or (path.stem if path else "scenario")),
        latency_map=lmap,
        truth=truth,
        workload=workload,
        control_period_s=float(_num(data, "control_period_s", 60.0, where, minimum=1e-3)),
        min_replicas=min_r,
        max_replicas=max_r,
        warmup_s=None if warmup is None else float(_num(data, "warmup_s", 0, where)),
        seed=int(_num(data, "seed", 1, where)),
        source=source,
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (see the module docstring)."""
    return scenario_from_dict(read_yaml(path, "scenario"), str(path), Path(path))
