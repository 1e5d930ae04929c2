"""The inputs a bundle carries: byte copies of every file a run read (scenario, latency maps, rate file, model,
plug-in files, a query file) under `inputs/`, each with its SHA-256, so that a replay reads the bundle and nothing
else.

`carry` copies them when a run starts; `CarriedInputs.path` gives a replay the copy of a role after checking its
hash and that it lies inside the bundle (a path outside is followed only when the replay allows it).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.experiment.manifest import named, sha256

INPUTS = "inputs"


def _scenario_refs(scenario: Path) -> dict[str, Path]:
    """The files a scenario file names itself: its latency map (when a path) and its rate file (`csv`)."""
    from gesscale.scenario import _find
    from gesscale.yamlfile import read_yaml

    data = read_yaml(scenario, "scenario")
    out: dict[str, Path] = {}
    cluster = data.get("cluster") if isinstance(data, dict) else None
    if isinstance(cluster, dict) and isinstance(cluster.get("latency_map"), str):
        out["scenario_latency_map"] = _find(cluster["latency_map"], scenario)
    workload = data.get("workload") if isinstance(data, dict) else None
    if isinstance(workload, dict) and workload.get("kind") == "csv" and isinstance(workload.get("path"), str):
        out["scenario_workload_csv"] = _find(workload["path"], scenario)
    return out


def input_files(spec: Any) -> dict[str, Path]:
    """Role -> file of every file the spec's run reads."""
    from jobs.query import kind_of, split_spec

    files: dict[str, Path] = {}
    if spec.scenario_path is not None:
        files["scenario"] = spec.scenario_path
        refs = _scenario_refs(spec.scenario_path)
        if spec.latency_map is None and "scenario_latency_map" in refs:  # else the spec's map replaces it
            files["scenario_latency_map"] = refs["scenario_latency_map"]
        if spec.workload is None and "scenario_workload_csv" in refs:  # else the spec's workload replaces it
            files["scenario_workload_csv"] = refs["scenario_workload_csv"]
    if spec.latency_map is not None:
        files["latency_map"] = spec.latency_map
    if spec.workload and spec.workload.get("kind") == "csv" and spec.workload.get("path"):
        files["workload_csv"] = Path(spec.workload["path"])
    if spec.model is not None:
        files["model"] = spec.model
    for pid, (path, _cls) in spec.plugins.items():
        files[f"plugin:{pid}"] = Path(path)
    query = spec.local.get("query")
    if isinstance(query, str) and kind_of(query) == "file":
        files["query"] = Path(split_spec(query)[0])
    return files


def carry(spec: Any, out: Path, written: list[Path] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """Copy every input file of the spec into `out/inputs/` (role-named, so two files of the same name do not
    collide); returns the manifest's `inputs` record and the copies written (also appended to `written`)."""
    record: dict[str, Any] = {}
    written = [] if written is None else written
    for role, src in input_files(spec).items():
        if not src.is_file():
            raise UserError(f"input {role}: file not found: {src}")
        name = role.replace(":", "-") + "".join(src.suffixes[-1:])
        dest = named(out, INPUTS, name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        entry: dict[str, Any] = {"file": f"{INPUTS}/{name}", "sha256": sha256(dest), "copied_from": str(src)}
        if role.startswith("plugin:"):
            entry["class"] = spec.plugins[role.split(":", 1)[1]][1]
        record[role] = entry
        written.append(dest)
    return record, written


@dataclass(frozen=True)
class CarriedInputs:
    """The inputs a bundle's manifest lists, read back for a replay."""

    bundle: Path
    record: dict[str, Any]
    allow_outside: bool = False

    def has(self, role: str) -> bool:
        """True when the bundle carries an input of this role."""
        return role in self.record

    def path(self, role: str) -> Path:
        """The carried copy of `role`, checked: inside the bundle (unless `allow_outside`) and with the SHA-256 the
        manifest recorded."""
        entry = self.record.get(role)
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise UserError(f"{self.bundle}: manifest: input {role!r} has no file")
        name = entry["file"]
        candidate = self.bundle / name
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self.bundle.resolve()) and not self.allow_outside:
            raise UserError(f"{self.bundle}: input {role} ({name}) is outside the bundle; replay follows it only "
                            "with --allow-outside")
        if not candidate.is_file():
            raise UserError(f"{self.bundle}: input {role}: {name} is missing")
        if sha256(candidate) != entry.get("sha256"):
            raise UserError(f"{self.bundle}: input {role}: {name} does not have the SHA-256 the manifest recorded")
        return candidate
