"""Run policies on scenarios in the simulator and collect their metrics (what `gesscale simulate` prints).

One run = one policy, one scenario, one seed: a fresh `SimBackend`, a fresh policy and the MAPE loop until the
input has ended and drained. `simulate_many` repeats over seeds and takes medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gesscale.config import ControllerConfig
from gesscale.fidelity import observed_replica_minutes
from gesscale.latency_map import LatencyMap
from gesscale.mape import ControlLoop, StepRecord
from gesscale.measured_latency import LatencyChange, MeasuredLatency
from gesscale.metrics import DRAIN_S, METRIC_KEYS, RunMetrics, compute_metrics, replicas_needed
from gesscale.model import Measurement, PerformanceModel
from gesscale.policies.base import make_policy
from gesscale.scenario import Scenario
from gesscale.sim_backend import SimBackend


@dataclass
class RunResult:
    """Metrics and time series of one simulated run."""

    scenario: str
    policy: str
    seed: int
    metrics: RunMetrics
    duration_s: float
    completion_s: float
    input: np.ndarray
    processed: np.ndarray
    backlog: np.ndarray
    supply: np.ndarray
    demand: np.ndarray
    history: list[StepRecord] = field(default_factory=list)
    model: dict[str, Any] | None = None
    drained: bool = True  # False: the drain limit was reached with a backlog left (the policy failed)
    # What the controller saw of the network (`--latency-source`) and the changes its measured view logged
    latency_source: str = "map"
    latency_changes: list[LatencyChange] = field(default_factory=list)
    # Replica-minutes as a live run measures them, at the observations (`gesscale.fidelity`): a twin's figure
    observed_cost: float | None = None


def controller_config(scenario: Scenario, seed: int, **overrides: Any) -> ControllerConfig:
    """The controller options a scenario implies (period, bounds, warm-up, its `controller:` section), with
    explicit overrides."""
    opts: dict[str, Any] = {
        "control_period_s": scenario.control_period_s,
        "min_replicas": scenario.min_replicas,
        "max_replicas": scenario.max_replicas,
        "seed": seed,
    }
    if scenario.warmup_s is not None:
        opts["warmup_s"] = scenario.warmup_s
    opts.update(scenario.controller)
    opts.update(overrides)
    return ControllerConfig(**opts)


def takes_model(policy_id: str) -> bool:
    """True when the policy has a performance model that `--model` can start it from."""
    return hasattr(make_policy(policy_id), "model")


def starting_model(model: PerformanceModel, latency_in_model: bool) -> PerformanceModel:
    """A copy of `model` for a policy to start from; a policy whose model ignores latency (`mdl-nlunaware`)
    gets the same measurements seen at ND_max = 0 and refitted, as it would have recorded them itself."""
    copy = PerformanceModel.from_dict(model.to_dict())
    if latency_in_model or not copy.measurements_:
        return copy
    flat = PerformanceModel(**copy.get_params())
    return flat.fit([Measurement(m.n, 0.0, m.mst) for m in copy.measurements_])


def effective_demand(backend: SimBackend, period: int) -> np.ndarray:
    """The replicas each second of the input needs to sustain its input (averaged over the trailing control
    period, as the ideal demand) plus draining the backlog then waiting within `DRAIN_S`
    (`gesscale.metrics`), judged by the map in force at that second."""
    T, sc = backend.input_end, backend.scenario
    csum = np.concatenate([[0.0], np.cumsum(backend.rate[:T])])
    idx = np.arange(T)
    lo = np.maximum(0, idx + 1 - period)
    load = (csum[idx + 1] - csum[lo]) / (idx + 1 - lo) + backend.backlog_at[:T] / DRAIN_S
    changes = sorted({int(np.ceil(t)) for t in sc.latency_map.change_times if 0 < t < T})
    bounds = [0, *changes, T]
    need = np.empty(T, dtype=int)
    for a, b in zip(bounds, bounds[1:], strict=False):
        need[a:b] = replicas_needed(load[a:b], backend.best_mst_by_n(a), sc.min_replicas, sc.max_replicas)
    return need


@dataclass(frozen=True)
class NetworkView:
    """What the controller of a simulated run sees of the network (docs/events.md, "What the controller sees"):
    the map the loop starts from (the operator's), the map in force it follows (`ControlLoop(network=...)`;
    None: the starting map throughout) and, for a measured source, the smoother the simulator feeds."""

    latency_map: LatencyMap
    network: Callable[[float], LatencyMap] | None
    measured: MeasuredLatency | None = None

    @property
    def log(self) -> Callable[[float], tuple[LatencyChange, ...]] | None:
        """The changes the measured view logged since the loop last asked (`ControlLoop(network_log=...)`:
        `MeasuredLatency.changes_until`); None for `map`."""
        return self.measured.changes_until if self.measured is not None else None

    @property
    def unconfirmed(self) -> Callable[[float], tuple[tuple[str, str], ...]] | None:
        """The pairs the measured view saw rise in its last round but has not taken yet
        (`ControlLoop(network_unconfirmed=...)`: `MeasuredLatency.unconfirmed`); None for `map`."""
        return self.measured.unconfirmed if self.measured is not None else None


def network_view(scenario: Scenario, source: str) -> NetworkView:
    """The controller's view for `latency_source` `source`: `map`, the operator's map in force
    (`LatencyMap.documented`: its own `changes:`, not the link entries of an events file), as the live controller
    sees it; `measured` or `both`, a `MeasuredLatency` over that map, fed by the simulator every period."""
    operator_map = scenario.latency_map.documented
    if source == "map":
        return NetworkView(operator_map, operator_map.at if operator_map.changes else None)
    measured = MeasuredLatency(operator_map, source)
    return NetworkView(operator_map, measured.view, measured)


def run_once(scenario: Scenario, policy_id: str, seed: int, keep_history: bool = False,
             initial_model: PerformanceModel | None = None, policy_options: dict[str, Any] | None = None,
             on_step: Callable[[StepRecord, Any], None] | None = None, **overrides: Any) -> RunResult:
    """Simulate one policy on one scenario with one seed.

    `initial_model` (e.g. from `gesscale calibrate`) is handed, as a copy, to policies that take a `model`;
    `policy_options` go to the policy's constructor, over the scenario's own for that policy (`policy_options:`);
    `on_step(record, policy)` is called after every period.

    The network the controller sees is the config's `latency_source` (docs/events.md): `map`, the operator's map
    (`LatencyMap.documented`: its own `changes:`, not the link entries of an events file); `measured` or `both`,
    a `MeasuredLatency` the simulator feeds with the true RTTs at the end of every period. The simulated fog
    itself is always the scenario's map with every change and event.
    """
    config = controller_config(scenario, seed, **overrides)
    seen = network_view(scenario, config.latency_source)
    backend = SimBackend(scenario, seed=seed, measured=seen.measured)
    demand = backend.demand()
    policy = make_policy(policy_id, **{**scenario.policy_options.get(policy_id, {}), **(policy_options or {})})
    if initial_model is not None and hasattr(policy, "model"):
        policy.model = starting_model(initial_model, getattr(policy, "uses_latency_in_model", True))
    prepare = getattr(policy, "prepare_offline", None)
    if callable(prepare):  # an offline reference (`optimal`) reads the whole run before it starts
        prepare(backend)

    def oracle(t0: float, t1: float) -> int:
        lo, hi = int(t0), min(len(demand), int(t1))
        return int(demand[lo:hi].max()) if hi > lo else scenario.min_replicas

    timed = scenario.truth.reconfig or {}

    def step_hook(record: StepRecord) -> None:
        if record.applied and record.reconfiguration and record.reconfiguration.kind in timed:
            # a change with a measured timing: the warm-up runs from when it took effect, as the live runner's
            loop.last_reconfig_s = float(backend.reconfigurations[-1].effective_s or record.observation.time_s)
        if on_step is not None:
            on_step(record, policy)

    loop = ControlLoop(backend, policy, seen.latency_map, config, oracle_demand=oracle, network=seen.network,
                       network_log=seen.log, network_unconfirmed=seen.unconfirmed,
                       on_step=step_hook if timed or on_step is not None else None,
                       input_end_s=float(backend.input_end) if scenario.input_end_known else None)
    until: Callable[[], bool] | None = None
    if scenario.after_drain is not None:  # the demo's end of a run: a few drained periods to scale in
        end = scenario.after_drain.rule()

        def drained_end() -> bool:
            return end.over(loop.history[-1] if loop.history else None, backend.t >= backend.input_end,
                            lambda t: loop.context(t).in_warmup)
        until = drained_end
    history = loop.run(until=until)
    end = backend.t
    T = backend.input_end
    # Completion: the last second with backlog, or the input end if the backlog was never left over.
    left = np.nonzero(backend.backlog_at[:end] >= 1.0)[0]
    completion = float(max(T, left[-1] + 1 if left.size else T))
    reconfigs = sum(1 for h in history if h.applied and h.reconfiguration and h.reconfiguration.kind != "move")
    moves = sum(1 for h in history if h.applied and h.reconfiguration and h.reconfiguration.kind == "move")
    completion_idx = int(min(end, max(T, completion)))
    metrics = compute_metrics(
        demand,
        backend.supply[:T],
        dt=1.0,
        completion_s=completion,
        supply_until_completion=backend.supply[:completion_idx],
        backlog=backend.backlog_at[:end],
        delay=backend.delay[:completion_idx],
        reconfigurations=reconfigs,
        moves=moves,
        period=backend.period,
        effective_demand=effective_demand(backend, backend.period),
        arrivals=backend.input[:end],
        departures=backend.processed[:end],
    )
    return RunResult(
        scenario=scenario.name,
        policy=policy_id,
        seed=seed,
        metrics=metrics,
        duration_s=float(T),
        completion_s=completion,
        input=backend.input[:end].copy(),
        processed=backend.processed[:end].copy(),
        backlog=backend.backlog_at[:end].copy(),
        supply=backend.supply[:end].copy(),
        demand=demand,
        history=history if keep_history else [],
        model=policy.model_summary(),
        drained=backend.backlog < 1.0,
        latency_source=config.latency_source,
        latency_changes=list(seen.measured.changes) if seen.measured is not None else [],
        observed_cost=observed_replica_minutes(history, float(T)),
    )


def with_references(policies: list[str]) -> list[str]:
    """The policies, then the regret references (`optimal`, `ideal`) that are not among them."""
    from gesscale.regret import REFERENCES

    return [*policies, *(r for r in REFERENCES if r not in policies)]


def regret_of(results: dict[str, list[RunResult]]) -> dict[str, dict[str, float | int | None]]:
    """Cost and excess of each policy against the references run on the same seeds (`gesscale.regret`)."""
    from gesscale.regret import Outcome, regret

    return regret({pid: [Outcome(r.seed, r.metrics.cost, r.metrics.excess_time, r.drained, r.metrics.late_share)
                         for r in runs] for pid, runs in results.items()})


def seeds_for(scenario: Scenario, count: int) -> list[int]:
    """`count` seeds starting at the scenario's own."""
    return [scenario.seed + i for i in range(count)]


def median_metrics(results: Iterable[RunResult]) -> dict[str, float]:
    """Median of each metric key over runs."""
    rs = list(results)
    out: dict[str, float] = {}
    for k in METRIC_KEYS:
        out[k] = float(statistics.median(r.metrics.to_dict()[k] for r in rs))
    return out


def simulate_many(
    scenario: Scenario,
    policies: list[str],
    seeds: int,
    progress: Callable[[str, int], None] | None = None,
    keep_history_first: bool = False,
    policy_options: dict[str, dict[str, Any]] | None = None,
    **overrides: Any,
) -> dict[str, list[RunResult]]:
    """Every policy on every seed; returns the runs per policy (seed order).

    `keep_history_first` keeps the step history of each policy's first seed (for plots); `policy_options` maps
    a policy id to its constructor options (`gesscale.options.parse_policy_option_args`).
    """
    out: dict[str, list[RunResult]] = {}
    for pid in policies:
        out[pid] = []
        for i, seed in enumerate(seeds_for(scenario, seeds)):
            keep = keep_history_first and i == 0
            out[pid].append(run_once(scenario, pid, seed, keep_history=keep,
                                     policy_options=(policy_options or {}).get(pid), **overrides))
            if progress:
                progress(pid, seed)
    return out


TIMESERIES_COLUMNS = ("t_s", "input_rate", "throughput", "backlog", "replicas", "ideal_replicas", "nd_max_ms",
                      "cpu", "paused_s", "decision", "applied", "reason")


def period_rows(result: RunResult) -> list[dict[str, Any]]:
    """One row per control period of a run kept with its history (`TIMESERIES_COLUMNS`): what was observed at
    the period's end (mean input and throughput, backlog, replicas, ND_max, CPU), the ideal replica count of the
    period (the actionable demand, `gesscale.metrics.period_demand`; empty once the input has ended) and the
    decision with its reason."""
    return history_rows(result.history, np.asarray(result.demand))


def history_rows(history: Sequence[StepRecord], demand: np.ndarray | None = None) -> list[dict[str, Any]]:
    """`period_rows` of any control loop's history (a live run has no `demand`: its ideal column is empty)."""
    rows: list[dict[str, Any]] = []
    d = np.zeros(0) if demand is None else demand
    t0 = 0.0
    for h in history:
        o, dec = h.observation, h.decision
        lo, hi = int(t0), min(len(d), int(o.time_s))
        rows.append({
            "t_s": o.time_s, "input_rate": round(o.input_rate, 3), "throughput": round(o.throughput, 3),
            "backlog": round(o.backlog, 1), "replicas": len(o.replicas),
            "ideal_replicas": int(d[lo:hi].max()) if hi > lo else "",
            "nd_max_ms": round(o.nd_max_ms, 2), "cpu": "" if o.cpu is None else round(o.cpu, 4),
            "paused_s": o.paused_s, "decision": dec.target, "applied": int(h.applied), "reason": dec.reason,
        })
        t0 = o.time_s
    return rows
