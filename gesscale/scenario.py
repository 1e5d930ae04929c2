"""Scenario files for the simulator (YAML, docs/scenarios.md): cluster, ground truth, workload, seed.

The ground truth (alpha, beta, gamma, noise, reconfiguration pause and, for a twin of a live run, each kind of
reconfiguration's measured timing) is what the simulated operator really does; policies never see it (only the
`ideal` oracle reads the demand derived from it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gesscale.config import MAX_SEED
from gesscale.errors import UserError, brief
from gesscale.latency_map import SUSPICIOUS_RTT_MS, TINY_RTT_MS, LatencyMap, latency_map_from_dict, load_latency_map
from gesscale.model import FORMS, MODEL_LATENCIES
from gesscale.names import check_name
from gesscale.run_end import AFTER_DRAIN_MAX_PERIODS, AFTER_DRAIN_PERIODS, AfterDrain
from gesscale.schema import check_keys, number
from gesscale.workloads import WORKLOAD_KINDS, check_workload
from gesscale.yamlfile import read_yaml

RECONFIG_KINDS = ("up", "down", "move")  # a move: added first, then removed, in one change (the testbed's)
RECONFIG_TIMING_KEYS = ("effective_s", "pause_s", "observation_gap_s", "per_node")


@dataclass(frozen=True)
class ReconfigTiming:
    """How one kind of reconfiguration (`up`, `down`, or `move`: a node added first, then one removed, in one
    change) behaves on the platform, as a live run measured it.

    From the decision, the configuration being left keeps serving (at the smaller capacity of the old and the
    new one) until `effective_s - pause_s`, then nothing is processed for `pause_s`, and from `effective_s` the new
    configuration serves. The loop sees no observation while the change is under way: the next one ends
    `observation_gap_s` after the decision (None: `effective_s` plus one control period, as a live loop whose
    backend returns once the change is effective)."""

    effective_s: float
    pause_s: float
    observation_gap_s: float | None = None
    # Whether effective_s is per node added or removed: a change of k nodes is effective k x effective_s after the
    # decision, and observed that much later too (the local backend adds executors one after the other: 41-46 s
    # for one, 184-220 s for five in the live Table III's runs)
    per_node: bool = False

    def for_nodes(self, k: int) -> ReconfigTiming:
        """The timing of a change of `k` nodes (itself unless `per_node`)."""
        if not self.per_node or k <= 1:
            return self
        extra = self.effective_s * (k - 1)
        gap = None if self.observation_gap_s is None else self.observation_gap_s + extra
        return ReconfigTiming(effective_s=self.effective_s + extra, pause_s=self.pause_s, observation_gap_s=gap)


@dataclass(frozen=True)
class ColdStart:
    """The operator's first seconds, as a live run measured them in its first period, before any decision: the
    day's first micro-batch starts cold (19 of the 20 runs of the live Table III processed 7-12 records/s in it, where
    one warm replica takes 300-400/s), so for `seconds` from the start at most `rate` records/s are processed, and no
    back pressure is signalled (a cold micro-batch is not a full one; every live first period reported none)."""

    seconds: int
    rate: float


@dataclass(frozen=True)
class CpuShare:
    """The CPU utilisation a busy operator reports at n replicas, as a live run measured it: `share` x n^`exponent`
    (at most 1) of the busy fraction, with a measurement noise of standard deviation `noise`. On the testbed a
    saturated job's executors use all of their CPU budget at one or two replicas and less with more (the median
    over the live Table III's saturated periods: 1.0 at one and two, 0.89 at three, 0.58 at four, 0.51 at six): the
    micro-batch is busy, its executors partly wait. Without it, the CPU is the busy fraction with a noise of 0.02."""

    share: float = 1.0
    exponent: float = 0.0
    noise: float = 0.02

    def of(self, n: int) -> float:
        """The CPU utilisation of a fully busy period at n replicas."""
        return min(1.0, self.share * max(1, n) ** self.exponent)


@dataclass(frozen=True)
class GroundTruth:
    """How the simulated operator really behaves (unknown to the policies)."""

    alpha: float = 60.0
    beta: float = 0.9
    gamma: float = 0.1
    noise: float = 0.03
    reconfig_pause_s: float = 120.0
    initial_replicas: int = 2
    # The form of MST(n, ND_max) (`gesscale.model.FORMS`): `paper` uses gamma, `per-replica` gamma, and
    # `proportional` delta (alpha n^beta (1 - delta ND_max)).
    form: str = "paper"
    delta: float = 0.0
    # The leave-one-out errors the form was chosen by (a scenario calibrated from a run); not used to simulate.
    loo: dict[str, Any] | None = None
    # Per kind of reconfiguration, its measured timing (a twin of a live run); a kind not given pauses for
    # `reconfig_pause_s` from the decision, the new configuration in place at once (the paper's restart).
    reconfig: dict[str, ReconfigTiming] | None = None
    # The cold start of the first seconds (a twin of a live run); None: the operator serves at its MST from t = 0.
    cold_start: ColdStart | None = None
    # The CPU a busy operator reports (a twin of a live run); None: the busy fraction, with a noise of CPU_NOISE.
    cpu: CpuShare | None = None
    # The nodes of the first placement (a twin of a live run with events, or that started below its minimum: where
    # its replicas were, which an event on a node hits or not); None: the simulator places `initial_replicas` as a
    # scale-up from nothing would.
    initial_nodes: tuple[str, ...] | None = None
    # What the MST's latency is (`gesscale.model.MODEL_LATENCIES`): ND_max among the replicas (the paper's), or
    # `site`, the farthest replica's RTT to the scenario's `site` (broker and driver), as the live job's tasks follow.
    latency: str = "nd_max"

    def timing(self, kind: str) -> ReconfigTiming:
        """The timing of a reconfiguration of `kind` (`up`, `down` or `move`)."""
        if self.reconfig and kind in self.reconfig:
            return self.reconfig[kind]
        return ReconfigTiming(effective_s=self.reconfig_pause_s, pause_s=self.reconfig_pause_s)

    def mst(self, n: int, nd_max_ms: float) -> float:
        """True MST of n replicas at ND_max (records/s), without noise."""
        if n < 1:
            return 0.0
        if self.form == "paper":
            return max(0.0, self.alpha * n**self.beta - self.gamma * nd_max_ms)
        f = FORMS[self.form]
        return f.mst(self.alpha, self.beta, self.delta if f.latency_param == "delta" else self.gamma, n, nd_max_ms)


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
    # The other controller options (`controller:` keys besides the period, warm-up, bounds and seed, which have
    # their own fields) and the options per policy id (`policy_options:`), checked against their declaration.
    controller: dict[str, Any] = field(default_factory=dict)
    policy_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # How the run ends (`gesscale.run_end`): None, when the input has ended and the backlog drained; a twin of a
    # demo run gets the demo's drained periods to scale in (`after_drain:`).
    after_drain: AfterDrain | None = None
    # Whether the controller is told when the input ends (`PolicyContext.input_end_s`): the simulator knows it; a
    # live loop does not, nor does the simulated twin of a live run.
    input_end_known: bool = True
    warnings: tuple[str, ...] = ()  # legal but suspicious values (see `_suspicious`), for the CLI to print
    # The node of the input broker and the job's driver (cluster.site): what an operator's `latency: site` and a
    # controller's `model_latency: site` measure from; None: not given.
    site: str | None = None

    def with_seed(self, seed: int) -> Scenario:
        """The same scenario with another seed."""
        return replace(self, seed=seed)


# Keys of each part of a scenario file; anything else is a mistake (a misspelled key would leave its default).
SCENARIO_KEYS = ("name", "control_period_s", "warmup_s", "seed", "cluster", "operator", "workload", "controller",
                 "policy_options", "after_drain", "input_end_known", "events")
AFTER_DRAIN_KEYS = ("periods", "max_periods")
# Controller options a scenario may also give at their historical place (top level or under `cluster:`).
_PLACED = {"control_period_s": None, "warmup_s": None, "seed": None, "min_replicas": "cluster",
           "max_replicas": "cluster"}
CLUSTER_KEYS = ("latency_map", "min_replicas", "max_replicas", "site")
OPERATOR_KEYS = ("alpha", "beta", "gamma", "noise", "reconfig_pause_s", "initial_replicas", "form", "delta", "loo",
                 "reconfig", "cold_start", "cpu", "initial_nodes", "latency")
COLD_START_KEYS = ("seconds", "rate")
CPU_KEYS = ("share", "exponent", "noise")
# The shortest control period taken: the loop observes, decides and reconfigures once per period, and the
# observations are per-second rates; below a second a period holds less than one sample.
MIN_CONTROL_PERIOD_S = 1.0
# The longest control period and warm-up (one day, `gesscale.config`), and the longest reconfiguration pause (an
# hour: a restart that takes longer is an outage, not a pause; the `optimal` reference's work grows with it).
MAX_CONTROL_PERIOD_S = 86400.0
MAX_PAUSE_S = 3600.0


def _suspicious(truth: GroundTruth, control_period_s: float, warmup_s: float | None) -> list[str]:
    """Values that are legal but probably not meant (printed as warnings, the run goes on)."""
    out = []
    if truth.beta > 1.0:
        out.append(f"operator.beta {truth.beta:g} > 1: each added replica brings more than the previous one "
                   "(superlinear scaling; measured operators have beta <= 1)")
    if truth.noise >= 0.5:
        out.append(f"operator.noise {truth.noise:g}: the MST varies by {truth.noise:.0%} (one standard deviation) "
                   "from period to period; the model can hardly be learnt")
    if warmup_s is not None and warmup_s < truth.reconfig_pause_s:
        out.append(f"warmup_s {warmup_s:g} < operator.reconfig_pause_s {truth.reconfig_pause_s:g}: decisions may "
                   "be taken while the operator is still paused")
    if control_period_s > 3600:
        out.append(f"control_period_s {control_period_s:g}: more than an hour between decisions")
    return out


def _find(ref: str, scenario_path: Path) -> Path:
    """Resolve a path named in a scenario: beside the file, in any folder above it, or from the CWD."""
    p = Path(ref)
    if p.is_absolute():
        return p
    for base in [scenario_path.parent, *scenario_path.resolve().parents, Path.cwd()]:
        try:
            if (base / p).exists():
                return base / p
        except OSError:  # a name the file system cannot hold (too long) is not there; the reader says why
            continue
    return p


def scenario_from_dict(data: Any, source: str = "<inline>", path: Path | None = None) -> Scenario:
    """Validate a parsed scenario; every problem is a `UserError` naming the file and key."""
    where = source
    if not isinstance(data, Mapping):
        raise UserError(f"{where}: a scenario must be a mapping (name, cluster, operator, workload)")
    check_keys(data, SCENARIO_KEYS, where)
    cluster = data.get("cluster")
    if not isinstance(cluster, Mapping):
        raise UserError(f"{where}: missing 'cluster' (latency_map or nodes + rtt_ms, min/max_replicas)")
    if "latency_map" in cluster:
        check_keys(cluster, CLUSTER_KEYS, f"{where}: cluster")
        ref = cluster["latency_map"]
        if isinstance(ref, Mapping):
            lmap = latency_map_from_dict(ref, f"{where}: cluster.latency_map")
        else:
            lmap = load_latency_map(_find(str(ref), path or Path(source)))
    elif "nodes" in cluster:
        lmap = latency_map_from_dict(cluster, f"{where}: cluster", other_keys=("min_replicas", "max_replicas", "site"))
    else:
        raise UserError(f"{where}: cluster needs 'latency_map' (file) or inline 'nodes' and 'rtt_ms'")

    op = data.get("operator") or {}
    if not isinstance(op, Mapping):
        raise UserError(f"{where}: 'operator' must be a mapping of ground-truth values")
    check_keys(op, OPERATOR_KEYS, f"{where}: operator")
    w_op = f"{where}: operator"
    pause_s = float(number(op, "reconfig_pause_s", 120.0, w_op, lo=0.0, hi=MAX_PAUSE_S, duration=True))
    truth = GroundTruth(
        alpha=float(number(op, "alpha", 60.0, w_op, lo=0.0, lo_open=True, hi=1e9)),
        beta=float(number(op, "beta", 0.9, w_op, lo=0.0, lo_open=True, hi=4.0)),
        gamma=float(number(op, "gamma", 0.1, w_op, lo=0.0, hi=1e9)),
        noise=float(number(op, "noise", 0.03, w_op, lo=0.0, hi=1.0, hi_open=True)),
        reconfig_pause_s=pause_s,
        initial_replicas=number(op, "initial_replicas", 2, w_op, lo=1, integer=True),
        form=_form(op, w_op),
        delta=float(number(op, "delta", 0.0, w_op, lo=0.0)),
        loo=_loo(op, w_op),
        reconfig=_reconfig(op, w_op, pause_s),
        cold_start=_cold_start(op.get("cold_start"), w_op),
        cpu=_cpu(op.get("cpu"), w_op),
        initial_nodes=_initial_nodes(op, lmap, w_op),
        latency=_latency(op, w_op),
    )
    site = _site(cluster, lmap, f"{where}: cluster")
    if truth.latency == "site" and site is None:
        raise UserError(f"{w_op}: latency site needs cluster.site (the node of the input broker and the driver)")
    workload = data.get("workload")
    if workload is None:
        raise UserError(f"{where}: missing 'workload' (kind: {' | '.join(WORKLOAD_KINDS)})")
    workload = check_workload(workload, where)
    if workload["kind"] == "csv" and "path" in workload:
        workload["path"] = str(_find(str(workload["path"]), path or Path(source)))

    w_cl = f"{where}: cluster"
    min_r = number(cluster, "min_replicas", 1, w_cl, lo=1, integer=True)
    max_r = number(cluster, "max_replicas", len(lmap.names), w_cl, lo=1, integer=True)
    period = float(number(data, "control_period_s", 60.0, where, lo=MIN_CONTROL_PERIOD_S, hi=MAX_CONTROL_PERIOD_S,
                          duration=True))
    warmup = None if data.get("warmup_s") is None else float(number(data, "warmup_s", 0, where, lo=0.0,
                                                                     hi=MAX_CONTROL_PERIOD_S, duration=True))
    name = data.get("name")
    if name is not None and not isinstance(name, str | int):
        raise UserError(f"{where}: 'name' must be a string, got {name!r}")
    name = str(name or (path.stem if path else "scenario"))
    check_name("scenario", name, f"{where}: name")  # time series and figures are named after it
    sc = Scenario(
        name=name,
        latency_map=lmap,
        truth=truth,
        workload=workload,
        control_period_s=period,
        min_replicas=min_r,
        max_replicas=max_r,
        warmup_s=warmup,
        seed=number(data, "seed", 1, where, lo=0, hi=MAX_SEED, integer=True),
        source=source,
        policy_options=_policy_options(data.get("policy_options"), where),
        after_drain=_after_drain(data.get("after_drain"), where),
        input_end_known=_flag(data, "input_end_known", True, where),
        site=site,
    )
    # What happens to the fog (docs/events.md), as `--events FILE`: the truth the simulated fog follows, not the
    # operator's map (a simulated twin carries its live run's events here: gesscale.twin)
    sc = with_events(sc, data.get("events"), where)
    controller = _controller_section(data, where)
    return with_controller(sc, controller, f"{where}: controller") if controller else _checked(sc, where)


def _flag(data: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    """A true/false key."""
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise UserError(f"{where}: '{key}' must be true or false, got {brief(value)}")
    return value


def _after_drain(section: Any, where: str) -> AfterDrain | None:
    """after_drain: the drained periods the run gets to scale in (`gesscale.run_end`); absent: none."""
    if section is None:
        return None
    w = f"{where}: after_drain"
    if not isinstance(section, Mapping):
        raise UserError(f"{w}: must be a mapping of {', '.join(AFTER_DRAIN_KEYS)}, got {brief(section)}")
    check_keys(section, AFTER_DRAIN_KEYS, w)
    periods = number(section, "periods", AFTER_DRAIN_PERIODS, w, lo=0, hi=1000, integer=True)
    most = number(section, "max_periods", max(periods, AFTER_DRAIN_MAX_PERIODS), w, lo=periods, hi=1000,
                  integer=True)
    return AfterDrain(periods=int(periods), max_periods=int(most))


def _form(op: Mapping[str, Any], where: str) -> str:
    """operator.form: one of the model's forms (`auto` is a choice of the controller, not a ground truth)."""
    form = op.get("form", "paper")
    if form not in FORMS:
        raise UserError(f"{where}: 'form' must be one of {', '.join(FORMS)}, got {form!r}")
    return str(form)


def _latency(op: Mapping[str, Any], where: str) -> str:
    """operator.latency: what the MST's latency is, nd_max (default) or site."""
    latency = op.get("latency", "nd_max")
    if latency not in MODEL_LATENCIES:
        raise UserError(f"{where}: 'latency' must be one of {', '.join(MODEL_LATENCIES)}, got {brief(latency)}")
    return str(latency)


def _site(cluster: Mapping[str, Any], lmap: LatencyMap, where: str) -> str | None:
    """cluster.site: a node of the map (the input broker's and the driver's), or None."""
    site = cluster.get("site")
    if site is None:
        return None
    if not isinstance(site, str) or site not in lmap.nodes:
        raise UserError(f"{where}: 'site' must be a node of the latency map, got {brief(site)}")
    return site


def _reconfig(op: Mapping[str, Any], where: str, pause_s: float) -> dict[str, ReconfigTiming] | None:
    """operator.reconfig: per kind (`up`, `down`), the measured `effective_s` (default: the pause), `pause_s`
    (default `reconfig_pause_s`, at most `effective_s`) and `observation_gap_s` (at least `effective_s`: no
    observation while a change is under way)."""
    section = op.get("reconfig")
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise UserError(f"{where}: 'reconfig' must be a mapping of kind (up, down) to its timing, got {brief(section)}")
    check_keys(section, RECONFIG_KINDS, f"{where}: reconfig")
    out = {}
    for kind, timing in section.items():
        w = f"{where}: reconfig.{kind}"
        if not isinstance(timing, Mapping):
            raise UserError(f"{w}: must be a mapping of {', '.join(RECONFIG_TIMING_KEYS)}, got {brief(timing)}")
        check_keys(timing, RECONFIG_TIMING_KEYS, w)
        effective = timing.get("effective_s")
        if effective is not None:
            effective = float(number(timing, "effective_s", None, w, lo=0.0, hi=MAX_PAUSE_S, duration=True))
        pause = float(number(timing, "pause_s", pause_s if effective is None else min(pause_s, effective), w, lo=0.0,
                             hi=MAX_PAUSE_S, duration=True))
        effective = pause if effective is None else effective
        if pause > effective:
            raise UserError(f"{w}: pause_s {pause:g} is longer than effective_s {effective:g} (the pause is part of "
                            "the time until the new configuration serves)")
        gap = timing.get("observation_gap_s")
        if gap is not None:
            gap = float(number(timing, "observation_gap_s", None, w, lo=effective, hi=MAX_PAUSE_S, duration=True))
        per_node = timing.get("per_node", False)
        if not isinstance(per_node, bool):
            raise UserError(f"{w}: 'per_node' must be true or false, got {brief(per_node)}")
        out[str(kind)] = ReconfigTiming(effective_s=effective, pause_s=pause, observation_gap_s=gap, per_node=per_node)
    return out


def _cold_start(section: Any, where: str) -> ColdStart | None:
    """operator.cold_start: `seconds` (whole, >= 1) during which at most `rate` records/s (>= 0) are processed."""
    if section is None:
        return None
    w = f"{where}: cold_start"
    if not isinstance(section, Mapping):
        raise UserError(f"{w}: must be a mapping of {', '.join(COLD_START_KEYS)}, got {brief(section)}")
    check_keys(section, COLD_START_KEYS, w)
    seconds = number(section, "seconds", None, w, lo=1, hi=MAX_PAUSE_S, integer=True)
    rate = number(section, "rate", None, w, lo=0.0, hi=1e9)
    if seconds is None or rate is None:
        raise UserError(f"{w}: needs both {' and '.join(COLD_START_KEYS)}")
    return ColdStart(seconds=int(seconds), rate=float(rate))


def _initial_nodes(op: Mapping[str, Any], lmap: LatencyMap, where: str) -> tuple[str, ...] | None:
    """operator.initial_nodes: distinct nodes of the map, as many as `initial_replicas` (default 2)."""
    value = op.get("initial_nodes")
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(n, str) for n in value):
        raise UserError(f"{where}: 'initial_nodes' must be a non-empty list of node names, got {brief(value)}")
    unknown = [n for n in value if n not in lmap.nodes]
    if unknown:
        raise UserError(f"{where}: 'initial_nodes' names unknown node {unknown[0]!r}")
    if len(set(value)) != len(value):
        raise UserError(f"{where}: 'initial_nodes' lists a node twice")
    if len(value) != op.get("initial_replicas", 2):
        raise UserError(f"{where}: 'initial_nodes' has {len(value)} node(s), initial_replicas is "
                        f"{op.get('initial_replicas', 2)}")
    return tuple(value)


def _cpu(section: Any, where: str) -> CpuShare | None:
    """operator.cpu: `share` in (0, 1e3], `exponent` in [-4, 4], `noise` in [0, 1)."""
    if section is None:
        return None
    w = f"{where}: cpu"
    if not isinstance(section, Mapping):
        raise UserError(f"{w}: must be a mapping of {', '.join(CPU_KEYS)}, got {brief(section)}")
    check_keys(section, CPU_KEYS, w)
    return CpuShare(share=float(number(section, "share", 1.0, w, lo=0.0, lo_open=True, hi=1e3)),
                    exponent=float(number(section, "exponent", 0.0, w, lo=-4.0, hi=4.0)),
                    noise=float(number(section, "noise", 0.02, w, lo=0.0, hi=1.0, hi_open=True)))


def _loo(op: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """operator.loo: the leave-one-out errors recorded with a calibrated form (kept as given, informative)."""
    loo = op.get("loo")
    if loo is not None and not isinstance(loo, Mapping):
        raise UserError(f"{where}: 'loo' must be a mapping of form to its leave-one-out errors, got {loo!r}")
    return None if loo is None else dict(loo)


def _controller_section(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The `controller:` section, checked; a key also given at its historical place is refused."""
    from gesscale.options import controller_from_dict

    section = data.get("controller")
    if section is None:
        return {}
    ctl = controller_from_dict(section, f"{where}: controller", env="sim")
    for key, parent in _PLACED.items():
        there = data.get(parent) if parent else data
        if key in ctl and isinstance(there, Mapping) and key in there:
            at = f"{parent}.{key}" if parent else key
            raise UserError(f"{where}: '{key}' is given twice, as controller.{key} and as {at}; keep one")
    return ctl


def _policy_options(section: Any, where: str) -> dict[str, dict[str, Any]]:
    """The `policy_options:` section: {policy id: {option: value}}, each checked against the policy's
    declaration (`gesscale options`)."""
    from gesscale.options import policy_options_from_dict

    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise UserError(f"{where}: 'policy_options' must be a mapping of policy id to options, got {section!r}")
    return {str(pid): policy_options_from_dict(str(pid), opts, f"{where}: policy_options.{pid}")
            for pid, opts in section.items()}


def _checked(sc: Scenario, where: str) -> Scenario:
    """The scenario with its controller values checked together (bounds against the map, the operator's
    starting size within them, the options' joint rules) and its warnings computed."""
    from gesscale.config import ControllerConfig

    if sc.control_period_s < MIN_CONTROL_PERIOD_S:
        raise UserError(f"{where}: 'control_period_s' must be >= {MIN_CONTROL_PERIOD_S:g} in the simulator, got "
                        f"{sc.control_period_s:g}")
    n_nodes = len(sc.latency_map.names)
    min_r, max_r = sc.min_replicas, sc.max_replicas
    if max_r < min_r:
        raise UserError(f"{where}: cluster.max_replicas ({max_r}) < min_replicas ({min_r})")
    if max_r > n_nodes:
        raise UserError(f"{where}: cluster.max_replicas ({max_r}) exceeds the {n_nodes} nodes of the map")
    # A first placement given node by node is a fact of a run (a twin's: the demo starts its job on one executor
    # whatever --min-replicas says, and the loop adds the others at its first period), so it may be below the
    # minimum; a count alone below it is a mistake.
    if not (1 if sc.truth.initial_nodes else min_r) <= sc.truth.initial_replicas <= max_r:
        raise UserError(f"{where}: operator.initial_replicas ({sc.truth.initial_replicas}) outside "
                        f"[min_replicas, max_replicas] = [{min_r}, {max_r}]")
    try:
        ControllerConfig(control_period_s=sc.control_period_s, min_replicas=min_r, max_replicas=max_r,
                         seed=sc.seed, **sc.controller)
    except UserError as err:
        raise UserError(f"{where}: {err}") from None
    if sc.controller.get("model_latency") == "site" and sc.site is None:
        raise UserError(f"{where}: model_latency site needs cluster.site (the node of the input broker and the "
                        "driver) in the scenario")
    if sc.controller.get("latency_source", "map") != "map":
        from gesscale.measured_latency import check_source

        check_source(sc.controller["latency_source"], sc.latency_map, f"{where}: 'latency_source'")
    return replace(sc, warnings=(*_suspicious(sc.truth, sc.control_period_s, sc.warmup_s),
                                 *(w for w in sc.latency_map.warnings
                                   if f"above {SUSPICIOUS_RTT_MS:g} ms" in w or f"below {TINY_RTT_MS:g} ms" in w)))


def with_controller(sc: Scenario, options: Mapping[str, Any], where: str = "command line") -> Scenario:
    """The scenario with controller options replaced (a `controller:` section, or the CLI's flags, checked by
    `gesscale.options`); `max_replicas` 0 means every node of the map. The result is checked as a loaded one."""
    if not options:
        return sc
    values = dict(options)
    fields_ = {k: values.pop(k) for k in _PLACED if k in values}
    if fields_.get("max_replicas") == 0:
        fields_["max_replicas"] = len(sc.latency_map.names)
    for key in ("control_period_s", "warmup_s"):
        if key in fields_:
            fields_[key] = float(fields_[key])
    return _checked(replace(sc, **fields_, controller={**sc.controller, **values}), where)


def with_events(sc: Scenario, raw: Any, source: str, key: str = "events") -> Scenario:
    """The scenario with more events (`gesscale.events`: link changes and fog events, e.g. `--events FILE`, an
    experiment's `events:`) merged into its map's schedule; checked against the map's nodes."""
    if raw is None:
        return sc
    return replace(sc, latency_map=sc.latency_map.with_events(raw, source, key))


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (see the module docstring)."""
    return scenario_from_dict(read_yaml(path, "scenario"), str(path), Path(path))
