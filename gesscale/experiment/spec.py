"""The experiment file (`gesscale experiment run SPEC.yaml`): what to run, where, and with which options.

    name: taxi-day                      # optional; default: the file's stem
    environment: sim                    # sim (built); local, k8s: not built yet (a user error)
    scenario: scenarios/pi10-taxi.yaml  # cluster, ground truth, workload and period to start from
    latency_map: inventory/latency/pi10.yaml       # optional: replaces the scenario's map
    workload: {kind: taxi, days: 1}     # optional: replaces the scenario's workload (any `gesscale.workloads`
                                        # kind: taxi = the synthetic diurnal profile, csv = a recorded rate file)
    control_period_s: 60                # optional: replaces the scenario's period
    policies: [gesscale, mdl-nlunaware, thr-nlaware, ideal]
    seeds: 2                            # runs per policy: the scenario's seed, +1, ...
    controller: {warmup_s: 180}         # optional: `gesscale options` keys
    policy_options: {static: {replicas: 3}}        # optional: constructor options per policy
    model: out/model.json               # optional: starting model of the model-based policies
    events:                             # optional: fog events (docs/events.md), merged with the map's changes
      - {t_s: 3600, event: crash, node: pi03, duration_s: 1800}

`environment: local` runs each policy live, one after the other, each on a fresh fog-in-a-box testbed (the
`gesscale demo` machinery: embedded broker, Spark standalone, fog nodes in cgroup CPU budgets, the map's RTTs
emulated, one synthetic taxi day replayed); it takes no `scenario`, `workload` or `seeds` (the demo's producer
replays the synthetic taxi day), and adds:

    local: {day_s: 150, nodes: 6, node_cpu: 0.25, control_period_s: 10, warmup_s: 10}   # `DemoOptions` keys
    sim_policies: [gesscale, thr-nlunaware, thr-nlaware, mdl-nlunaware]   # run on each live run's simulated twin

Durations are the workload's own keys (`days` of taxi, `duration_s` of the others). Relative paths are resolved
against the experiment file's folder, then the current directory. Every mistake is one `UserError` line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gesscale.errors import UserError, brief, cut
from gesscale.names import check_name
from gesscale.options import controller_from_dict, policy_options_from_dict
from gesscale.schema import check_keys, number

SPEC_KEYS = ("name", "environment", "scenario", "latency_map", "workload", "control_period_s", "policies", "seeds",
             "controller", "policy_options", "model", "events", "local", "sim_policies", "repeats", "compare",
             "order_seed")
ENVIRONMENTS = ("sim", "local", "k8s")
BUILT = ("sim", "local")
LOCAL_SPEC_KEYS = ("name", "environment", "policies", "local", "sim_policies", "latency_map", "repeats", "compare",
                   "order_seed")  # environment: local
MAX_REPEATS = 20  # the exact sign-flip test enumerates 2^blocks sign assignments
MAX_SEEDS = 100  # runs per policy of a simulated experiment
LOCAL_KEYS = ("day_s", "nodes", "node_cpu", "strategy", "rides_per_day", "peak_load", "start_hour",
              "hours", "control_period_s", "warmup_s", "drain_timeout_s", "query", "wan", "site", "port_shift")


@dataclass(frozen=True)
class ExperimentSpec:
    """A checked experiment file with every path resolved (`resolved()` is what the bundle records)."""

    name: str
    environment: str
    scenario_path: Path | None
    policies: tuple[str, ...]
    seeds: int
    latency_map: Path | None = None
    workload: dict[str, Any] | None = None
    control_period_s: float | None = None
    controller: dict[str, Any] = field(default_factory=dict)
    policy_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    model: Path | None = None
    source: str = "<inline>"
    local: dict[str, Any] = field(default_factory=dict)
    sim_policies: tuple[str, ...] = ()
    repeats: int = 1
    compare: tuple[tuple[str, str], ...] = ()
    order_seed: int | None = None
    plugins: dict[str, tuple[str, str]] = field(default_factory=dict)  # policy id -> (plug-in file, class)
    events: tuple[Any, ...] = ()  # entries of the events schema (docs/events.md), checked against the map

    def resolved(self) -> dict[str, Any]:
        """The spec as run: paths absolute, defaults filled in (JSON-ready)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = (str(v) if isinstance(v, Path) else [list(x) if isinstance(x, tuple) else x for x in v]
                           if isinstance(v, tuple) else {k: list(x) for k, x in v.items()} if f.name == "plugins"
                           else v)
        return out


def _path(value: Any, key: str, base: Path, where: str) -> Path:
    if not isinstance(value, str) or not value or "\x00" in value or len(value) > 4096:
        raise UserError(f"{where}: '{key}' must be a file path, got {brief(value)}")
    for root in (base, Path.cwd()):
        try:
            p = (root / value).resolve()
            if p.is_file():
                return p
        except OSError:  # a name too long for the file system: not found either
            continue
    raise UserError(f"{where}: '{key}': file not found: {cut(value)}")


def _mapping(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: '{key}' must be a mapping, got {brief(value)}")
    return value


def _policy_list(raw: Any, key: str, where: str, plugins: dict[str, tuple[str, str]] | None = None
                 ) -> tuple[str, ...]:
    """Policy ids; a plug-in (`file.py:Class`) is loaded, and its file and class recorded in `plugins`."""
    from gesscale.policies.base import is_plugin_spec, load_plugin, parse_policy_list

    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(p, str) for p in raw):
        raise UserError(f"{where}: '{key}' must be a non-empty list of policy ids, got {brief(raw)}")
    for item in raw:
        if is_plugin_spec(item.strip()) and plugins is not None:
            path, _, cls = item.strip().rpartition(":")
            plugins[load_plugin(item.strip())] = (str(Path(path).expanduser().resolve()), cls)
    return tuple(parse_policy_list(",".join(raw)))


def _pairs(raw: Any, policies: tuple[str, ...], where: str) -> tuple[tuple[str, str], ...]:
    """`compare: [[a, b], ...]`: pairs of two different policies of the spec."""
    if not isinstance(raw, list) or not all(isinstance(p, list) and len(p) == 2 for p in raw):
        raise UserError(f"{where}: 'compare' must be a list of pairs of policies, e.g. [[gesscale, mdl-nlunaware]]; "
                        f"got {brief(raw)}")
    out = []
    for a, b in raw:
        for p in (a, b):
            if not isinstance(p, str) or p not in policies:
                raise UserError(f"{where}: compare: {brief(p)} is not among the policies ({', '.join(policies)})")
        if a == b:
            raise UserError(f"{where}: compare: a pair needs two different policies, got [{a}, {b}]")
        out.append((str(a), str(b)))
    return tuple(out)


def _local_options(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The `local:` mapping, key by key: every number within the demo's declared range (`LOCAL_RANGES`, the
    same as its flags), the controller's two by their declaration (gesscale/config.py), the others by kind."""
    from gesscale.options import controller_option
    from gesscale.testbed.demo import LOCAL_RANGES, STRATEGIES

    check_keys(raw, LOCAL_KEYS, where)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in LOCAL_RANGES:
            lo, hi, integer = LOCAL_RANGES[key]
            out[key] = None if value is None and key == "rides_per_day" else number(
                raw, key, None, where, lo=lo, hi=hi, integer=integer)
        elif key in ("control_period_s", "warmup_s"):
            out[key] = controller_option(key).check(value, where)
        elif key == "strategy" and value not in STRATEGIES:
            raise UserError(f"{where}: 'strategy' must be one of {', '.join(STRATEGIES)}, got {brief(value)}")
        elif key == "wan" and not isinstance(value, bool):
            raise UserError(f"{where}: 'wan' must be true or false, got {brief(value)}")
        elif key == "site" and value is not None:
            out[key] = check_name("node", value, f"{where}: site")
        elif key == "query" and (not isinstance(value, str) or not value.strip() or len(value) > 4096
                                 or any(ord(c) < 32 for c in value)):
            # the query itself is loaded when the run starts (loading it may import code)
            raise UserError(f"{where}: 'query' must be a built-in query, a file.py:function or a module:function, "
                            f"got {brief(value)}")
        else:
            out[key] = value
    return out


def _local_spec(data: dict[str, Any], where: str, root: Path) -> ExperimentSpec:
    """The live part: policies run one after another on fresh testbeds (`gesscale.testbed.demo`)."""
    from gesscale.testbed.demo import DemoOptions

    for key in ("scenario", "workload", "seeds", "control_period_s", "controller", "policy_options", "model"):
        if key in data:
            raise UserError(f"{where}: '{key}' is not taken by environment: local (the demo replays the synthetic "
                            "taxi day; its options go in 'local')")
    check_keys(data, LOCAL_SPEC_KEYS, where)
    local = _local_options(_mapping(data, "local", where), f"{where}: local")
    lmap = _path(data["latency_map"], "latency_map", root, where) if "latency_map" in data else None
    try:
        DemoOptions(**local, latency_map=lmap).validate()
    except TypeError as err:
        raise UserError(f"{where}: local: {err}") from None
    sim = _policy_list(data["sim_policies"], "sim_policies", where) if "sim_policies" in data else ()
    plugins: dict[str, tuple[str, str]] = {}
    policies = _policy_list(data.get("policies"), "policies", where, plugins)
    repeats = number(data, "repeats", 1, where, lo=1, hi=MAX_REPEATS, integer=True)
    compare = _pairs(data["compare"], policies, where) if "compare" in data else ()
    if compare and repeats < 2:
        raise UserError(f"{where}: 'compare' needs 'repeats' of at least 2 (one block-paired difference per repeat)")
    order_seed = (None if data.get("order_seed") is None
                  else number(data, "order_seed", 0, where, lo=0, hi=2**32 - 1, integer=True))
    name = check_name("experiment", str(data.get("name") or Path(where).stem), f"{where}: name")
    return ExperimentSpec(name=name, environment="local", scenario_path=None,
                          policies=policies, seeds=1, latency_map=lmap, source=where, local=dict(local),
                          sim_policies=sim, repeats=repeats, compare=compare, order_seed=order_seed, plugins=plugins)


def spec_from_dict(data: Any, source: str = "<inline>", base: Path | None = None) -> ExperimentSpec:
    """Check a parsed experiment file (see the module docstring); every problem is a `UserError`."""
    from gesscale.policies.base import make_policy

    where = source
    if not isinstance(data, dict):
        raise UserError(f"{where}: an experiment file must be a mapping ({', '.join(SPEC_KEYS)})")
    root = base or Path.cwd()
    env = data.get("environment", "sim")
    if env not in ENVIRONMENTS:
        raise UserError(f"{where}: 'environment' must be one of {', '.join(ENVIRONMENTS)}, got {brief(env)}")
    if env not in BUILT:
        raise UserError(f"{where}: environment '{env}' is not built yet (built: "
                        f"{', '.join(repr(b) for b in BUILT)}: the simulator and the local testbed)")
    if env == "local":
        if "events" in data:
            raise UserError(f"{where}: 'events' is for environment: sim (an experiment's live runs take no events "
                            "yet; `gesscale demo --events FILE` does: docs/events.md)")
        return _local_spec(data, where, root)
    for key in ("local", "sim_policies", "repeats", "compare", "order_seed"):
        if key in data:
            raise UserError(f"{where}: '{key}' is for environment: local" + (" (the simulator repeats with 'seeds')"
                                                                              if key == "repeats" else ""))
    check_keys(data, SPEC_KEYS, where)
    if "scenario" not in data:
        raise UserError(f"{where}: missing 'scenario' (a scenario file: cluster, ground truth, workload)")
    scenario = _path(data["scenario"], "scenario", root, where)
    plugins: dict[str, tuple[str, str]] = {}
    policies = _policy_list(data.get("policies"), "policies", where, plugins)
    seeds = number(data, "seeds", 1, where, lo=1, hi=MAX_SEEDS, integer=True)
    period = None if "control_period_s" not in data else number(data, "control_period_s", None, where, lo=1,
                                                                hi=86400)  # as a scenario's (gesscale/scenario.py)
    # The same declaration as the command line and scenario files (gesscale.options); the cluster's size and
    # the period come from the scenario and `control_period_s`, the seed from `seeds`.
    controller = controller_from_dict(_mapping(data, "controller", where), f"{where}: controller",
                                      exclude=("seed", "min_replicas", "max_replicas", "control_period_s"))
    options = _mapping(data, "policy_options", where)
    for pid, opts in options.items():
        if pid not in policies:
            raise UserError(f"{where}: policy_options: {brief(pid)} is not among the policies ({', '.join(policies)})")
        options[pid] = policy_options_from_dict(pid, opts, f"{where}: policy_options: {pid}")
    if "model" in data and not any(hasattr(make_policy(p), "model") for p in policies):
        raise UserError(f"{where}: 'model': none of the policies {', '.join(policies)} has a performance model")
    events = data.get("events")
    if events is not None and not isinstance(events, list):
        raise UserError(f"{where}: 'events' must be a list of entries {{t_s, event, ...}} (docs/events.md), got "
                        f"{brief(events)}")
    workload = data.get("workload")
    if workload is not None and not isinstance(workload, dict):
        raise UserError(f"{where}: 'workload' must be a mapping (kind: ...), got {brief(workload)}")
    if workload and workload.get("kind") == "csv" and "path" in workload:
        workload = {**workload, "path": str(_path(workload["path"], "workload.path", root, where))}
    return ExperimentSpec(
        name=check_name("experiment", str(data.get("name") or Path(source).stem), f"{where}: name"),
        environment=env,
        scenario_path=scenario,
        policies=policies,
        seeds=seeds,
        latency_map=_path(data["latency_map"], "latency_map", root, where) if "latency_map" in data else None,
        workload=workload,
        control_period_s=period,
        controller=controller,
        policy_options={k: dict(v) for k, v in options.items()},
        model=_path(data["model"], "model", root, where) if "model" in data else None,
        source=source,
        plugins=plugins,
        events=tuple(events or ()),
    )


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and check an experiment file."""
    from gesscale.yamlfile import read_yaml

    p = Path(path)
    return spec_from_dict(read_yaml(p, "experiment"), str(p), p.parent)


def scenario_of(spec: ExperimentSpec):  # type: ignore[no-untyped-def]
    """The scenario the spec runs: its scenario file with the spec's map, workload and period in place,
    validated as any scenario file."""
    from gesscale.scenario import scenario_from_dict
    from gesscale.yamlfile import read_yaml

    if spec.scenario_path is None:
        raise UserError(f"{spec.source}: environment {spec.environment} has no scenario")
    data = dict(read_yaml(spec.scenario_path, "scenario"))
    if spec.latency_map is not None:
        cluster = dict(data.get("cluster") or {})
        cluster.pop("nodes", None)
        cluster.pop("rtt_ms", None)
        cluster["latency_map"] = str(spec.latency_map)
        data["cluster"] = cluster
    if spec.workload is not None:
        data["workload"] = dict(spec.workload)
    if spec.control_period_s is not None:
        data["control_period_s"] = spec.control_period_s
    data.setdefault("name", spec.name)
    sc = scenario_from_dict(data, str(spec.scenario_path), spec.scenario_path)
    if spec.events:
        from gesscale.scenario import with_events

        sc = with_events(sc, list(spec.events), spec.source)
    return sc
