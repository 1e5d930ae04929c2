"""`gesscale experiment replay DIR`: run a simulator bundle again, check it reproduces, and add policies.

The bundle's `spec.resolved.json` is the spec as run; replay rebuilds it, checks that the input it generates has
the SHA-256 the bundle recorded (per seed) and runs the bundle's policies plus any others asked for into a new
bundle. `compare_runs` then says, for every recorded run, whether each metric came out the same. A live
bundle (environment `local`) cannot be run again the same way; `replay_live` runs the simulated twin of each of
its runs instead (the scenario calibrated from that run) with any policies, beside the live figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gesscale.errors import UserError, brief, cut
from gesscale.experiment.spec import ExperimentSpec


def _read(path: Path) -> Any:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path.parent}: not an experiment bundle (no {path.name})") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(f"cannot read {path}: {cut(str(err))}") from None
    if not isinstance(doc, dict):
        raise UserError(f"{path}: a damaged bundle file (not a JSON object)")
    return doc


def spec_of_bundle(bundle: Path, extra_policies: Sequence[str] = ()) -> ExperimentSpec:
    """The spec a bundle was made with (its `spec.resolved.json`), with `extra_policies` appended; a damaged
    file (not a mapping, a key missing or of the wrong type) is one `UserError`."""
    try:
        return _spec_of_bundle(bundle, extra_policies)
    except (KeyError, TypeError, ValueError, AttributeError, OSError) as err:  # OSError: a path too long
        raise UserError(f"{bundle}: a damaged bundle: spec.resolved.json is not a spec as `experiment run` writes "
                        f"it ({type(err).__name__}: {cut(str(err))})") from None


def _spec_of_bundle(bundle: Path, extra_policies: Sequence[str]) -> ExperimentSpec:
    doc = _read(bundle / "spec.resolved.json")
    if doc.get("environment") != "sim":
        raise UserError(f"{bundle}: environment {brief(doc.get('environment'))} cannot be replayed yet (only sim "
                        "bundles)")

    def path(key: str) -> Path | None:
        return None if doc.get(key) is None else Path(doc[key])

    scenario = path("scenario_path")
    if scenario is None or not scenario.is_file():
        raise UserError(f"{bundle}: the scenario file {doc.get('scenario_path')} is no longer there")
    policies = list(doc["policies"])
    policies += [p for p in extra_policies if p not in policies]
    return ExperimentSpec(name=f"{doc['name']}-replay", environment="sim", scenario_path=scenario,
                          policies=tuple(policies), seeds=int(doc["seeds"]), latency_map=path("latency_map"),
                          workload=doc.get("workload"), control_period_s=doc.get("control_period_s"),
                          controller=dict(doc.get("controller") or {}),
                          policy_options=dict(doc.get("policy_options") or {}), model=path("model"),
                          source=str(bundle / "spec.yaml"))


def input_mismatches(recorded: Mapping[str, str], replayed: Mapping[str, str]) -> list[str]:
    """The seeds whose input hash differs between the bundle and the replay."""
    return sorted(s for s in recorded if replayed.get(s) != recorded[s])


def compare_runs(recorded: Sequence[Mapping[str, Any]], replayed: Sequence[Mapping[str, Any]],
                 rel_tol: float = 1e-9) -> list[str]:
    """One line per metric of a recorded run (policy, seed) that the replay did not reproduce; [] when all match."""
    again = {(r["policy"], r["seed"]): r for r in replayed}
    out = []
    for r in recorded:
        twin = again.get((r["policy"], r["seed"]))
        if twin is None:
            out.append(f"{r['policy']} seed {r['seed']}: not replayed")
            continue
        for k, v in r.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "seed":
                w = twin.get(k)
                if not isinstance(w, int | float) or not math.isclose(v, w, rel_tol=rel_tol, abs_tol=1e-12):
                    out.append(f"{r['policy']} seed {r['seed']}: {k} {v} -> {w}")
    return out


def check_replay(bundle: Path, replay: Path) -> tuple[list[str], list[str]]:
    """(seeds whose input differs, metric lines not reproduced) between a bundle and its replay."""
    env_a = _read(bundle / "environment.json")["input"]["rate_sha256_by_seed"]
    env_b = _read(replay / "environment.json")["input"]["rate_sha256_by_seed"]
    runs_a = _read(bundle / "metrics.json")["runs"]
    runs_b = _read(replay / "metrics.json")["runs"]
    return input_mismatches(env_a, env_b), compare_runs(runs_a, runs_b)


def is_live_bundle(bundle: Path) -> bool:
    """True for a bundle of `environment: local` (live runs)."""
    return _read(bundle / "spec.resolved.json").get("environment") == "local"


LIVE_KEYS = ("reconfigurations", "avg_replicas", "max_backlog")
TWIN_KEYS = ("reconfigurations", "avg_replicas", "max_backlog", "cost", "excess_time")


def replay_live(bundle: Path, extra_policies: Sequence[str], out: Path, seeds: int = 3) -> dict[str, Any]:
    """The simulated twin of every live run of a `local` bundle: the scenario calibrated from that run (its
    measured MSTs fitted into the ground truth, its measured pauses, the day it replayed; `run_demo` wrote it)
    run with the live policy, the bundle's `sim_policies` and `extra_policies`, `seeds` seeds each. Writes
    `out/metrics.json` and `out/twins.md` (the live figures and the simulated ones side by side); returns the
    metrics document."""
    from gesscale.policies.base import parse_policy_list
    from gesscale.report import summary, write_json
    from gesscale.scenario import scenario_from_dict
    from gesscale.simulate import simulate_many

    spec = _read(bundle / "spec.resolved.json")
    runs = _read(bundle / "metrics.json")["runs"]
    doc: dict[str, Any] = {"environment": "local-replay", "bundle": str(bundle), "seeds": seeds, "twins": {}}
    lines = ["| live run | row | " + " | ".join(TWIN_KEYS) + " |", "|" + " --- |" * (len(TWIN_KEYS) + 2)]
    for pid, run in runs.items():
        scenario = run.get("calibrated_scenario")
        if not scenario:
            raise UserError(f"{bundle}: the live run of {pid} has no calibrated scenario (was it cut short?)")
        wanted = list(dict.fromkeys([pid, *spec.get("sim_policies", []), *extra_policies]))
        results = simulate_many(scenario_from_dict(scenario, f"{pid}-twin"), parse_policy_list(",".join(wanted)),
                                seeds)
        medians = summary(results)
        doc["twins"][pid] = {"live": run["live"], "simulated": {p: medians[p] for p in wanted if p in medians}}
        live = run["live"]
        lines.append(f"| {pid} | **live** | {live.get('reconfigurations')} | {_fmt(live.get('avg_replicas'))} | "
                     f"{_fmt(live.get('max_backlog'))} | – | – |")
        for p in wanted:
            m = medians.get(p, {})
            lines.append(f"| {pid} | simulated {p} | " + " | ".join(_fmt(m.get(k)) for k in TWIN_KEYS) + " |")
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", doc)
    (out / "twins.md").write_text("Each live run next to its simulated twin (the scenario calibrated from that run; "
                                  f"medians over {seeds} seeds)\n\n" + "\n".join(lines) + "\n")
    return doc


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,.0f}" if isinstance(value, (int, float)) else str(value)
