"""`gesscale experiment replay DIR`: run a simulator bundle again, check it reproduces, and add policies.

The bundle's `spec.resolved.json` is the spec as run; replay rebuilds it, checks that the input it generates has
the SHA-256 the bundle recorded (per seed) and runs the bundle's policies plus any others asked for into a new
bundle. `compare_runs` then says, for every recorded run, whether each metric came out the same. A live
bundle (environment `local`) cannot be run again the same way; `replay_live` runs the simulated twin of each of
its runs instead (`gesscale.twin`: built from what the run measured, its demo report under `live/<run>/`) with
any policies, beside the live figures, and the twin of the live policy against the run (`gesscale.fidelity`).

A replay reads the bundle and nothing else: the copies of the inputs under `inputs/` (each checked against the
SHA-256 its manifest recorded), never the original paths; a path that leads outside the bundle is followed only
with `allow_outside`. It runs no code from the bundle: a plug-in policy the bundle carries is loaded only with
`trust_code`. A bundle written before bundles carried their inputs (no `manifest.json`) is refused, saying how to
replay it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gesscale.errors import UserError, brief, cut
from gesscale.experiment.spec import MAX_SEEDS, ExperimentSpec
from gesscale.names import check_name
from gesscale.schema import number

# A replay is named `<name>-replay`: the name is cut so that the whole stays a valid name (63 characters).
REPLAY_NAME_CHARS = 63 - len("-replay")


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


def carried_inputs(bundle: Path, allow_outside: bool = False) -> Any:
    """The bundle's manifest of inputs (`CarriedInputs`); a bundle without a manifest (written before bundles
    carried their inputs) is refused with one line that says how to replay it."""
    from gesscale.experiment.inputs import CarriedInputs
    from gesscale.experiment.manifest import FORMAT, MANIFEST

    _read(bundle / "spec.resolved.json")  # not a bundle at all: says so first
    if not (bundle / MANIFEST).is_file():
        raise UserError(f"{bundle}: written before bundles carried their inputs (no {MANIFEST}); run its spec again "
                        f"(gesscale experiment run {bundle / 'spec.yaml'} --out NEW), or replay it with the gesscale "
                        "of the commit in its environment.json")
    manifest = _read(bundle / MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("inputs"),
                                                                                              dict):
        raise UserError(f"{bundle}: {MANIFEST} is not a bundle manifest of format {FORMAT}")
    return CarriedInputs(bundle, manifest["inputs"], allow_outside)


def checked_policies(bundle: Path, ids: Any, plugins: Mapping[str, Any], carried: Any,
                     trust_code: bool) -> dict[str, tuple[str, str]]:
    """Check a bundle's policy ids before anything runs: built-in ids pass; a plug-in the bundle carries is loaded
    from its copy only with `trust_code`; anything else (a file named as a policy) is refused. Returns the
    plug-ins loaded (id -> (copy, class))."""
    from gesscale.policies.base import is_plugin_spec, load_plugin, policy_ids

    if not isinstance(ids, list) or not all(isinstance(p, str) for p in ids):
        raise UserError(f"{bundle}: spec.resolved.json: 'policies' is not a list of policy ids")
    known = set(policy_ids())
    loaded: dict[str, tuple[str, str]] = {}
    for pid in ids:
        if pid in known:
            continue
        if is_plugin_spec(pid) or pid not in plugins or not carried.has(f"plugin:{pid}"):
            raise UserError(f"{bundle}: policy {pid!r} is neither a built-in policy nor a plug-in the bundle carries")
        role = f"plugin:{pid}"
        if not trust_code:
            raise UserError(f"{bundle}: policy {pid!r} is a plug-in (its code is in {carried.record[role]['file']}); "
                            "replay runs no code from a bundle unless --trust-code")
        copy, cls = carried.path(role), str(carried.record[role].get("class", ""))
        if load_plugin(f"{copy}:{cls}") != pid:
            raise UserError(f"{bundle}: the plug-in {carried.record[role]['file']} does not define policy {pid!r}")
        loaded[pid] = (str(copy), cls)
    return loaded


def spec_of_bundle(bundle: Path, extra_policies: Sequence[str] = (), trust_code: bool = False,
                   allow_outside: bool = False) -> ExperimentSpec:
    """The spec a bundle was made with (its `spec.resolved.json`) on the copies of its inputs, with
    `extra_policies` appended; checked before anything runs (module docstring). A damaged file (not a mapping, a
    key missing or of the wrong type) is one `UserError`."""
    try:
        return _spec_of_bundle(bundle, extra_policies, trust_code, allow_outside)
    except (KeyError, TypeError, ValueError, AttributeError, OSError) as err:  # OSError: a path too long
        raise UserError(f"{bundle}: a damaged bundle: spec.resolved.json is not a spec as `experiment run` writes "
                        f"it ({type(err).__name__}: {cut(str(err))})") from None


def _spec_of_bundle(bundle: Path, extra_policies: Sequence[str], trust_code: bool,
                    allow_outside: bool) -> ExperimentSpec:
    from gesscale.experiment.inputs import _scenario_refs
    from gesscale.options import controller_from_dict, policy_options_from_dict

    carried = carried_inputs(bundle, allow_outside)
    doc = _read(bundle / "spec.resolved.json")
    if doc.get("environment") != "sim":
        raise UserError(f"{bundle}: environment {brief(doc.get('environment'))} cannot be replayed yet (only sim "
                        "bundles)")
    if not carried.has("scenario"):
        raise UserError(f"{bundle}: the bundle carries no copy of its scenario (inputs/)")
    scenario = carried.path("scenario")
    latency_map = carried.path("latency_map") if carried.has("latency_map") else None
    workload = doc.get("workload")
    if workload is not None and not isinstance(workload, dict):
        raise UserError(f"{bundle}: spec.resolved.json: 'workload' is not a mapping")
    if workload and "path" in workload:
        workload = {**workload, "path": str(carried.path("workload_csv"))}
    refs = _scenario_refs(scenario)
    if "scenario_latency_map" in refs and latency_map is None:
        latency_map = carried.path("scenario_latency_map")
    if "scenario_workload_csv" in refs and not workload:
        from gesscale.yamlfile import read_yaml

        workload = {**read_yaml(scenario, "scenario")["workload"], "path": str(carried.path("scenario_workload_csv"))}
    plugins = checked_policies(bundle, doc.get("policies"), doc.get("plugins") or {}, carried, trust_code)
    policies = list(doc["policies"])
    policies += [p for p in _extra_ids(extra_policies, plugins) if p not in policies]
    where = f"{bundle}/spec.resolved.json"
    options = doc.get("policy_options") or {}
    if not isinstance(options, dict):
        raise UserError(f"{where}: 'policy_options' is not a mapping")
    events = doc.get("events") or []
    if not isinstance(events, list):
        raise UserError(f"{where}: 'events' is not a list")
    # The name, seeds and period are checked as in an experiment file: the name becomes file names, a period of
    # NaN or 10^308 seeds would be run as given.
    name = check_name("experiment", doc.get("name"), f"{where}: name")
    seeds = number(doc, "seeds", None, where, lo=1, hi=MAX_SEEDS, integer=True)
    period = None if doc.get("control_period_s") is None else number(doc, "control_period_s", None, where, lo=1,
                                                                      hi=86400)
    return ExperimentSpec(name=f"{name[:REPLAY_NAME_CHARS]}-replay", environment="sim", scenario_path=scenario,
                          policies=tuple(policies), seeds=seeds, latency_map=latency_map,
                          workload=workload, control_period_s=period,
                          controller=controller_from_dict(doc.get("controller") or {}, f"{where}: controller",
                                                          exclude=("seed", "min_replicas", "max_replicas",
                                                                   "control_period_s")),
                          policy_options={p: dict(policy_options_from_dict(p, o, f"{where}: policy_options: {p}"))
                                          for p, o in options.items()},
                          model=carried.path("model") if carried.has("model") else None,
                          source=str(bundle / "spec.yaml"), plugins=plugins, events=tuple(events))


def _extra_ids(extra: Sequence[str], plugins: dict[str, tuple[str, str]]) -> list[str]:
    """The ids of the policies asked for on the command line (the user's own plug-ins are loaded, and recorded in
    `plugins` so that the replay's bundle carries them)."""
    from gesscale.policies.base import is_plugin_spec, load_plugin, parse_policy_list

    out = []
    for item in extra:
        if is_plugin_spec(item):
            path, _, cls = item.rpartition(":")
            pid = load_plugin(item)
            plugins[pid] = (str(Path(path).expanduser().resolve()), cls)
            out.append(pid)
        else:
            out += parse_policy_list(item)
    return out


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


def _inline_scenario(bundle: Path, rid: str, scenario: Any, allow_outside: bool) -> Any:
    """A calibrated scenario as recorded in the bundle: it must name no file (its map and workload are inline), or
    the replay would read outside the bundle; followed only with `allow_outside`."""
    if not isinstance(scenario, dict):
        raise UserError(f"{bundle}: the calibrated scenario of {rid} is not a mapping")
    cluster = scenario.get("cluster") if isinstance(scenario.get("cluster"), dict) else {}
    workload = scenario.get("workload") if isinstance(scenario.get("workload"), dict) else {}
    named = [v for v in (cluster.get("latency_map"), workload.get("path")) if isinstance(v, str)]
    if named and not allow_outside:
        raise UserError(f"{bundle}: the calibrated scenario of {rid} names a file ({named[0]!r}) outside the bundle; "
                        "replay follows it only with --allow-outside")
    return scenario


def _run_report(bundle: Path, rid: str) -> dict[str, Any] | None:
    """The demo report of a live run (`live/<run>/report.json`), or None when the bundle has none."""
    from gesscale.experiment.manifest import named

    path = named(bundle, "live", rid) / "report.json"
    if not path.is_file():
        return None
    report = _read(path)
    ok = isinstance(report.get("periods"), list) and isinstance(report.get("reconfigurations"), list)
    return report if ok else None


def twin_of_run(recorded: dict[str, Any], report: dict[str, Any] | None,
                live: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """(the twin's scenario, what it was built from, the live figures `gesscale.fidelity` compares) of one live
    run. With its demo report, the twin is built again from the measurements the report holds (periods, each
    change's timing, the MST points; `gesscale.twin`), on the map, bounds and warm-up of the recorded scenario;
    without one, the recorded scenario is run as it is, and the live figures are those of `live` (no excess)."""
    from gesscale.fidelity import observed, scale_changes
    from gesscale.twin import build_twin, run_network

    if report is None:
        return recorded, None, {"reconfigurations": live.get("reconfigurations"),
                                "replica_minutes": live.get("replica_minutes"), "excess": None,
                                "p95_latency_s": live.get("latency_p95_s")}
    cluster = recorded.get("cluster") or {}
    period = (report.get("options") or {}).get("control_period_s") or recorded.get("control_period_s") or 10.0
    scenario, measured = build_twin(report["periods"], report["reconfigurations"], report.get("model"),
                                    cluster.get("latency_map") or {}, int(cluster.get("max_replicas") or 1),
                                    recorded.get("warmup_s"), float(period), report.get("arrivals"),
                                    min_replicas=int(cluster.get("min_replicas") or 1), **run_network(report))
    return scenario, measured, observed(report["periods"], scale_changes(report["reconfigurations"]),
                                         report.get("latency"))


def replay_live(bundle: Path, extra_policies: Sequence[str], out: Path, seeds: int = 3, force: bool = False,
                allow_outside: bool = False, argv: Sequence[str] = ()) -> dict[str, Any]:
    """The simulated twin of every live run of a `local` bundle (`twin_of_run`: built from what the run measured)
    run with the live policy, the bundle's `sim_policies` and `extra_policies`, `seeds` seeds each, and the live
    policy's medians on its twin against the run (`gesscale.fidelity`). Writes `out/metrics.json`,
    `out/twins.md`, `out/fidelity.md` and `out/manifest.json` (a new or empty folder, or `force`); returns the
    metrics document."""
    from gesscale.experiment.manifest import prepare_out, write_manifest
    from gesscale.fidelity import fidelity_markdown, fidelity_rows, predicted
    from gesscale.policies.base import policy_ids
    from gesscale.report import simulated_latency, summary, write_json
    from gesscale.scenario import scenario_from_dict
    from gesscale.simulate import simulate_many

    carried_inputs(bundle, allow_outside)
    spec = _read(bundle / "spec.resolved.json")
    runs = _read(bundle / "metrics.json").get("runs")
    if not isinstance(runs, dict):
        raise UserError(f"{bundle}: metrics.json has no runs")
    plugins: dict[str, tuple[str, str]] = {}
    extra = _extra_ids(extra_policies, plugins)
    known = set(policy_ids())
    sim_policies = spec.get("sim_policies", [])
    doc: dict[str, Any] = {"environment": "local-replay", "bundle": str(bundle), "seeds": seeds, "twins": {}}
    lines = ["| live run | row | " + " | ".join(TWIN_KEYS) + " |", "|" + " --- |" * (len(TWIN_KEYS) + 2)]
    work = []
    for rid, run in runs.items():
        pid = run.get("policy", rid) if isinstance(run, dict) else rid
        scenario = run.get("calibrated_scenario") if isinstance(run, dict) else None
        if not scenario:
            raise UserError(f"{bundle}: the live run of {rid} has no calibrated scenario (was it cut short?)")
        wanted = list(dict.fromkeys([pid, *sim_policies, *extra]))
        unknown = [p for p in wanted if not isinstance(p, str) or p not in known]
        if unknown:  # a bundle names policies by id; a plug-in's code is never loaded from a live bundle
            raise UserError(f"{bundle}: run {rid}: {unknown[0]!r} is not a built-in policy (a live bundle's twins run "
                            "built-in policies and those given with --policies)")
        recorded = _inline_scenario(bundle, rid, scenario, allow_outside)
        twin, measured, seen = twin_of_run(recorded, _run_report(bundle, rid), run.get("live") or {})
        work.append((rid, run, wanted, _inline_scenario(bundle, rid, twin, allow_outside), measured, seen))
    prepare_out(out, force)
    fidelity_md = []
    for rid, run, wanted, scenario, measured, seen in work:
        results = simulate_many(scenario_from_dict(scenario, f"{rid}-twin"), wanted, seeds)
        medians = summary(results)
        latency = simulated_latency(results)["by_policy"]
        pid = wanted[0]
        rows = fidelity_rows(seen, predicted(medians.get(pid, {}), latency.get(pid), results.get(pid, ())))
        doc["twins"][rid] = {"live": run["live"], "simulated": {p: medians[p] for p in wanted if p in medians},
                             "twin": measured, "observed": seen, "fidelity": rows}
        fidelity_md += [f"\n{rid} ({pid}) on its twin against the live run"
                        f"{'' if measured else ' (the recorded calibrated scenario: no report.json)'}\n",
                        fidelity_markdown(rows)]
        live = run["live"]
        lines.append(f"| {rid} | **live** | {live.get('reconfigurations')} | {_fmt(live.get('avg_replicas'))} | "
                     f"{_fmt(live.get('max_backlog'))} | – | – |")
        for p in wanted:
            m = medians.get(p, {})
            lines.append(f"| {rid} | simulated {p} | " + " | ".join(_fmt(m.get(k)) for k in TWIN_KEYS) + " |")
    doc["command"] = list(argv)
    paths = [write_json(out / "metrics.json", doc)]
    (out / "twins.md").write_text("Each live run next to its simulated twin (built from what the run measured; "
                                  f"medians over {seeds} seeds)\n\n" + "\n".join(lines) + "\n")
    paths.append(out / "twins.md")
    (out / "fidelity.md").write_text(f"Each live run's policy on its twin against the live run (medians over {seeds} "
                                     "seeds; docs/experiments.md, \"The simulated twin of a live run\")\n"
                                     + "".join(fidelity_md))
    paths.append(out / "fidelity.md")
    write_manifest(out, paths, {}, "live-replay")
    return doc


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,.0f}" if isinstance(value, (int, float)) else str(value)
