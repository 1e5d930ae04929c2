"""The simulated twin of a live run, built from what the run measured about the platform (docs/experiments.md,
"The simulated twin of a live run").

A live run's decisions are what the twin is to predict, so the twin never reads them: not the decision log, not
a period's decision, not a change's reason, nodes or decision time. It reads what the run measured:

- the periods the loop observed (`time_s`, `period_s`, the input topic's end offset `extra.input_total`, the
  `input_rate`, the `replicas` found): the control period actually achieved (the median time between two
  observations with no change under way between them), and the input really produced, per second;
- from each reconfiguration only its measured timing: `started_s`, `effective_s` (the first micro-batch of the
  new configuration completed), `pause_s` (the longest stall around it); with the periods, the observation gap
  (the observation before the change to the first one after it); its direction is the change of the replicas
  observed before and after it (the backend's own `kind`, which it set from the executors it found, only when
  the periods carry no replicas);
- the MST points the run measured, fitted (`model`, as `gesscale.testbed.report.model_points` writes it);
- when the run read them, the input records' append times in the input topic, counted per second (`arrivals`):
  the input second by second, where the end offsets at the observations only give its mean between two of them
  (a minute, across a change).

- the first period, which ends before any decision: the cold start of the day's first micro-batch
  (`operator.cold_start`);
- the records processed between observations (`extra.processed_total`): the capacity the run showed, which a
  fit far below it (an MST point taken in the cold first period) gives way to;
- the CPU the busy periods reported at each size (`operator.cpu`), the signal the threshold policies read.

What happened to the fog during the run is no decision either: the run's events (`--events FILE`: link changes,
partitions, flaps, crashes, leaves, joins, churn; docs/events.md) go into the twin's `events:` re-timed onto the
twin's clock (`twin_events`), and the network its controller saw (`latency_source`) into `controller:`, so that
the twin's controller meets the same degradation or crash at the same instant of the run.

Per direction (up, down, and move: a replica moved in one change, as the testbed does it), the medians of the
effective delays (per node added or removed; per move), pauses and gaps become the scenario's
`operator.reconfig` (`gesscale.scenario.ReconfigTiming`), which the simulator plays (`gesscale.sim_backend`;
with a measured move, it moves in one change too). The twin ends as a demo run ends (`after_drain`,
`gesscale.run_end`) and its controller is not told when the input ends (`input_end_known: false`). The
configuration of the run (latency map, bounds, warm-up) is given by the caller. Pure: no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gesscale.run_end import AfterDrain

TWIN_NAME = "live-twin"
# What the twin reads of a reconfiguration record: its measured timing (and `kind` when the periods carry no
# replicas). Everything else in it (time_s, reason, nodes, added, removed, nd_max_ms, strategy) is the decision.
MEASURED_KEYS = ("started_s", "effective_s", "pause_s")


@dataclass(frozen=True)
class MeasuredChange:
    """One reconfiguration as the platform carried it out: when it started, when the new configuration served,
    how long nothing was processed, and how long the loop went without an observation."""

    kind: str
    started_s: float
    delay_s: float  # effective_s - started_s: until a micro-batch of the new configuration completed
    pause_s: float
    gap_s: float | None  # from the observation before the change to the first one after it (None: none after)
    nodes: int | None = None  # replicas added or removed: those observed after it less those before (None: unknown)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, rounded to ms."""
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _n(period: Mapping[str, Any]) -> int | None:
    replicas = period.get("replicas")
    return len(replicas) if isinstance(replicas, list | tuple) else None


def measured_changes(periods: Sequence[Mapping[str, Any]],
                     reconfigurations: Sequence[Mapping[str, Any]]) -> list[MeasuredChange]:
    """Each reconfiguration's measured timing (module docstring); a record without `started_s` and
    `effective_s` (not carried out by a live backend) is left out."""
    times = [float(p["time_s"]) for p in periods]
    out = []
    for r in reconfigurations:
        if r.get("started_s") is None or r.get("effective_s") is None:
            continue
        start, effective = float(r["started_s"]), float(r["effective_s"])
        before = [i for i, t in enumerate(times) if t <= start]
        after = [i for i, t in enumerate(times) if t > start]
        gap = times[after[0]] - times[before[-1]] if before and after else None
        n0 = _n(periods[before[-1]]) if before else None
        n1 = _n(periods[after[0]]) if after else None
        known = n0 is not None and n1 is not None and n0 != n1
        kind = ("up" if n1 > n0 else "down") if known else str(r["kind"])  # type: ignore[operator]
        out.append(MeasuredChange(kind=kind, started_s=start, delay_s=max(0.0, effective - start),
                                  pause_s=float(r.get("pause_s") or 0.0), gap_s=gap,
                                  nodes=abs(n1 - n0) if known else None))  # type: ignore[operator]
    return out


def achieved_period(periods: Sequence[Mapping[str, Any]], changes: Sequence[MeasuredChange]) -> float | None:
    """The median time between two consecutive observations with no reconfiguration started between them (None
    with fewer than two observations)."""
    times = [float(p["time_s"]) for p in periods]
    spans = [b - a for a, b in zip(times, times[1:], strict=False)
             if not any(a < c.started_s <= b for c in changes)]
    return float(statistics.median(spans)) if spans else None


def timing_by_kind(changes: Sequence[MeasuredChange]) -> dict[str, dict[str, Any]]:
    """Per direction, the median effective delay per node added or removed (`per_node`: the local backend adds
    and removes executors one after the other) over the changes whose count of nodes the periods tell (per change
    when none does), then the median pause and the median observation gap beyond the delay (the gap at least the
    delay: the live loop observes nothing until the change is effective)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ("up", "down", "move"):  # a move (same count before and after): per change, never per node
        mine = [c for c in changes if c.kind == kind]
        if not mine:
            continue
        counted = [c for c in mine if c.nodes]
        per_node = bool(counted)
        delay = statistics.median(c.delay_s / c.nodes for c in counted if c.nodes) if per_node else \
            statistics.median(c.delay_s for c in mine)
        pause = min(delay, statistics.median(c.pause_s for c in mine))
        timing: dict[str, Any] = {"effective_s": round(float(delay), 3), "pause_s": round(float(pause), 3),
                                  "per_node": per_node}
        beyond = [c.gap_s - c.delay_s for c in mine if c.gap_s is not None]
        if beyond:
            timing["observation_gap_s"] = round(float(delay + max(0.0, statistics.median(beyond))), 3)
        out[kind] = timing
    return out


def input_per_second(periods: Sequence[Mapping[str, Any]]) -> tuple[float, list[float]]:
    """(t0, records/s for each second from t0) of the input really produced: the input topic's end offset at
    each observation (`extra.input_total`), spread evenly over the time between two observations; where a
    period carries no offset, its `input_rate` over its `period_s`. t0 is the start of the first period; the
    series ends with the last second that had input."""
    if not periods:
        return 0.0, []
    first = periods[0]
    t0 = float(first["time_s"]) - float(first.get("period_s") or 0.0)
    xs, cum = [t0], [0.0]
    prev_total = None
    for p in periods:
        t = float(p["time_s"])
        total = (p.get("extra") or {}).get("input_total")
        if prev_total is not None and total is not None:
            arrived = max(0.0, float(total) - float(prev_total))
        else:
            arrived = max(0.0, float(p.get("input_rate") or 0.0)) * float(p.get("period_s") or 0.0)
        prev_total = total
        if t <= xs[-1]:
            cum[-1] += arrived
            continue
        xs.append(t)
        cum.append(cum[-1] + arrived)
    ends = np.asarray(cum)
    last = int(np.argmax(ends >= ends[-1] - 1e-9))  # the first observation by which everything had arrived
    seconds = max(1, int(math.ceil(xs[last] - t0)))
    grid = np.interp(t0 + np.arange(seconds + 1), xs, ends)
    return t0, [round(float(v), 3) for v in np.diff(grid)]


def arrivals_per_second(arrivals: Mapping[str, Any], t0: float) -> list[float]:
    """Records/s for each second from `t0` from the input topic's own append times: `arrivals` holds `from_s`
    (the first second, on the periods' clock) and `counts` (records appended in each second from it). Records
    appended before `t0` (waiting when the first period started) count in its first second; the series ends
    with the last second that had input."""
    counts = [float(c) for c in arrivals.get("counts") or []]
    if not counts:
        return []
    start = int(math.floor(t0))
    offset = int(math.floor(float(arrivals["from_s"]))) - start
    out = [0.0] * max(1, offset + len(counts))
    for i, c in enumerate(counts):
        out[max(0, offset + i)] += c
    while len(out) > 1 and out[-1] == 0.0:
        out.pop()
    return out


def relative_noise(model: Mapping[str, Any] | None, floor: float = 0.01, ceiling: float = 0.9) -> float:
    """Relative standard deviation of the measured MSTs around the model, within [`floor`, `ceiling`] (a
    scenario's noise must be below 1: a wildly scattered run is still simulated, at the ceiling)."""
    if not model or not model.get("fitted"):
        return 0.05
    rel = [(p["mst"] - p["predicted"]) / p["predicted"] for p in model["measurements"] if p.get("predicted")]
    return min(ceiling, max(floor, statistics.pstdev(rel))) if len(rel) >= 2 else 0.05


def cold_start_of(periods: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The cold start the run measured in its first period, before any decision (`operator.cold_start`): its
    length (whole seconds) and the records/s processed in it, when records still waited at its end (the rate was
    what the operator could take, not all it was given); None otherwise or with fewer than two periods."""
    if len(periods) < 2:
        return None
    first = periods[0]
    seconds = int(round(float(first.get("period_s") or 0.0)))
    if seconds < 1 or float(first.get("backlog") or 0.0) < 1.0:
        return None
    return {"seconds": seconds, "rate": round(max(0.0, float(first.get("throughput") or 0.0)), 3)}


def shown_capacity(periods: Sequence[Mapping[str, Any]], changes: Sequence[MeasuredChange]) -> float:
    """The most records/s per replica the run showed between two observations after its first period (the
    input topic's records processed, `extra.processed_total`), across a change counted as the twin plays it:
    the smaller configuration serving until the change is effective less its pause, the new one from then on.
    0 when the periods carry no such counts."""
    best = 0.0
    for a, b in zip(periods, periods[1:], strict=False):
        done_a, done_b = ((p.get("extra") or {}).get("processed_total") for p in (a, b))
        n_a, n_b = _n(a), _n(b)
        if done_a is None or done_b is None or not n_a or not n_b:
            continue
        t_a, t_b = float(a["time_s"]), float(b["time_s"])
        change = next((c for c in changes if t_a < c.started_s <= t_b), None)
        if change is None:
            replica_s = n_b * (t_b - t_a)
        else:
            before = change.started_s - t_a
            serving = min(max(0.0, change.delay_s - change.pause_s), t_b - change.started_s)
            after = max(0.0, t_b - change.started_s - change.delay_s)
            replica_s = n_a * before + min(n_a, n_b) * serving + n_b * after
        if replica_s > 0:
            best = max(best, (float(done_b) - float(done_a)) / replica_s)
    return best


BUSY = 0.9  # a period this busy tells the CPU share of a busy operator
MIN_CPU_NOISE = 0.02  # the simulator's own CPU noise (gesscale.sim_backend.CPU_NOISE)
MAX_CPU_NOISE = 0.3


def cpu_share_of(periods: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """The CPU a busy operator reported at each size (`operator.cpu`): over the periods at least BUSY busy with a
    CPU measured, the CPU per busy fraction (at most 1), fitted as share x n^exponent (log-linear; one size: its
    median, exponent 0), and the spread of the periods around the fit as the noise. None without such periods."""
    points = [(_n(p), min(1.0, float(p["cpu"]) / float(p["busy"]))) for p in periods
              if p.get("cpu") is not None and p.get("busy") is not None and float(p["busy"]) >= BUSY and _n(p)]
    if not points:
        return None
    ns = np.array([float(n) for n, _ in points])
    ys = np.maximum(np.array([y for _, y in points]), 1e-3)
    if len(set(ns)) >= 2:
        slope, intercept = np.polyfit(np.log(ns), np.log(ys), 1)
        share, exponent = float(np.exp(intercept)), float(slope)
    else:
        share, exponent = float(np.median(ys)), 0.0
    exponent = min(4.0, max(-4.0, exponent))
    fitted = np.minimum(1.0, share * ns**exponent)
    noise = float(np.std(ys - fitted)) if len(points) >= 2 else MIN_CPU_NOISE
    return {"share": round(min(1e3, share), 4), "exponent": round(exponent, 4),
            "noise": round(min(MAX_CPU_NOISE, max(MIN_CPU_NOISE, noise)), 4)}


# A fit whose one-replica MST is below 1/CONTRADICTED of the capacity the run showed is no measure of the platform
# (gesscale-plus measured MST(1) = 10.8/s in the cold first period, then processed 87,000 records in 230 s).
CONTRADICTED = 2.0


def operator_of(model: Mapping[str, Any] | None, periods: Sequence[Mapping[str, Any]],
                changes: Sequence[MeasuredChange] = ()) -> dict[str, Any]:
    """The operator's ground truth from the MST points the run measured (their fit), or, with none (never the
    root of back pressure), the best throughput per replica observed as a lower bound of one replica's MST.
    A fit the run's own processed records contradict (`shown_capacity` above CONTRADICTED times its MST(1)) is
    replaced by that capacity, linear in the replicas: a lower bound again, where the fit was far below it."""
    if model and model.get("fitted"):
        shown = shown_capacity(periods, changes)
        if shown <= CONTRADICTED * float(model["alpha"]):
            loo = model.get("loo") or None
            return {"form": model.get("form") or "paper", "alpha": float(model["alpha"]),
                    "beta": float(min(1.5, max(float(model["beta"]), 1e-3))),
                    "gamma": float(model.get("gamma") or 0.0), "delta": float(model.get("delta") or 0.0),
                    **({"loo": {f: {k: v[k] for k in ("median_abs", "max_abs", "rms")} for f, v in loo.items()}}
                       if loo else {})}
        return {"form": "paper", "alpha": round(shown, 3), "beta": 1.0, "gamma": 0.0, "delta": 0.0}
    best = max((float(p.get("throughput") or 0.0) / max(1, _n(p) or 1) for p in periods), default=100.0)
    return {"form": "paper", "alpha": max(best, 1.0), "beta": 1.0, "gamma": 0.0, "delta": 0.0}


def _shortened(entry: dict[str, Any], key: str, by: float) -> bool:
    """Take `by` seconds off the entry's `key` (absent: unbounded, kept); False when nothing of it is left."""
    if entry.get(key) is None:
        return True
    entry[key] = round(float(entry[key]) - by, 3)
    return entry[key] > 0


def twin_events(entries: Sequence[Mapping[str, Any]], shift_s: float,
                nodes: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The run's events (entries in their YAML form, every time in seconds: `gesscale.latency_map.event_entries`)
    on the twin's clock: each `t_s` plus `shift_s` (the run's t = 0 less the twin's, both on the periods' clock).
    An entry that would start before the twin does starts at its t = 0 with what is left of it: a link change in
    force from the start, a partition's, crash's or churn's `duration_s` and a leave's `drain_s` shortened (gone
    when nothing is left), a flap moved on by whole periods so that its phase is kept. With `nodes` (the twin's
    map), the entries naming another node are left out, as the testbed leaves out the events of nodes it does
    not run."""
    kept = set(nodes) if nodes is not None else None
    out = []
    for raw in entries:
        entry = dict(raw)
        named = [entry.get("node"), *(entry.get("pair") or []), *(entry.get("nodes") or []),
                 *(n for p in entry.get("pairs") or [] for n in p), *(n for g in entry.get("groups") or [] for n in g)]
        if kept is not None and any(n is not None and n not in kept for n in named):
            continue
        t = float(entry["t_s"]) + shift_s
        if t < 0:
            early = -t
            if entry.get("event") == "flap":
                early = math.ceil(early / float(entry["period_s"])) * float(entry["period_s"])
            if not _shortened(entry, "duration_s", early):
                continue
            if entry.get("event") == "leave" and not _shortened(entry, "drain_s", early):
                entry["drain_s"] = 0.0
            t = t + early if entry.get("event") == "flap" else 0.0
        entry["t_s"] = round(t, 3)
        out.append(entry)
    return sorted(out, key=lambda e: e["t_s"])


def run_network(report: Mapping[str, Any]) -> dict[str, Any]:
    """What a demo report says happened to the fog and what its controller saw (`build_twin`'s keywords):
    `network.events.entries` (every entry of `--events FILE` since this was written; before, its fog events
    only, without its link changes), their t = 0 on the controller's clock (`network.t0_unix` - the testbed's
    `testbed_t0_unix`: the day's start in the demo) and the controller's `latency_source` (default `map`)."""
    network = report.get("network") or {}
    entries = list((network.get("events") or {}).get("entries") or [])
    t0, base = network.get("t0_unix"), network.get("testbed_t0_unix")
    controller = (report.get("options") or {}).get("controller") or {}
    source = controller.get("latency_source") or "map"
    site = network.get("site") if isinstance(network.get("site"), str) else None
    return {"events": entries, "events_t0_s": float(t0) - float(base) if t0 is not None and base is not None else 0.0,
            "latency_source": source, "model_latency": str(controller.get("model_latency") or "nd_max"), "site": site}


def build_twin(periods: Sequence[Mapping[str, Any]], reconfigurations: Sequence[Mapping[str, Any]],
               model: Mapping[str, Any] | None, latency_map: Mapping[str, Any] | str, max_replicas: int,
               warmup_s: float | None, fallback_period_s: float,
               arrivals: Mapping[str, Any] | None = None, *, events: Sequence[Mapping[str, Any]] = (),
               events_t0_s: float = 0.0, latency_source: str = "map",
               min_replicas: int = 1, model_latency: str = "nd_max",
               site: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The twin's scenario (a dict for `scenario_from_dict`) and what it was built from (`measured`): the
    achieved period (`fallback_period_s`, the configured one, with fewer than two observations), each change's
    measured timing and their medians per direction, the input per second, the MST fit. `latency_map` is the
    run's map as a dict (`LatencyMap.to_dict`, or the file a recorded scenario named). With `arrivals` (the
    input records' append times counted per second, `arrivals_per_second`) the input follows them second by
    second; without, the end offsets at the observations, spread evenly between them. `events` are the run's
    events (`gesscale.latency_map.event_entries`) on the run's clock, whose t = 0 is `events_t0_s` on the
    periods' clock (the demo: the day's start); `latency_source` is what the run's controller saw of the
    network (`map`, `measured`, `both`); `min_replicas` and `max_replicas` its bounds. A run whose controller
    took `model_latency: site` (its model's points in the farthest replica's RTT to `site`, the run's broker and
    driver) gets a twin whose operator's MST takes that latency (`operator.latency`, `cluster.site`) and whose
    controller takes it too."""
    by_site = model_latency == "site" and site is not None
    changes = measured_changes(periods, reconfigurations)
    period = achieved_period(periods, changes) or fallback_period_s
    timing = timing_by_kind(changes)
    t0, rates = input_per_second(periods)
    # The twin's t = 0 on the periods' clock (the controller's: the testbed's start): its workload's first
    # second. The input's append times are counted in whole seconds of that clock, from floor(t0).
    zero = t0
    source = "input topic end offsets at the observations"
    if arrivals and arrivals.get("counts"):
        rates, source = arrivals_per_second(arrivals, t0), "input records' append times, per second"
        zero = float(math.floor(t0))
    names = list((latency_map.get("nodes") or {}) if isinstance(latency_map, Mapping) else ()) or None
    # The events' clock (t = 0: the run's, `events_t0_s` on the periods' clock) moved onto the twin's (t = 0:
    # `zero` on the periods' clock): an event at the run's t happens at t + events_t0_s - zero in the twin.
    shift = float(events_t0_s) - zero
    on_twin = twin_events(events, shift, names)
    pauses = [c.pause_s for c in changes]
    first_n = _n(periods[0]) if periods else None
    first_nodes = [str(n) for n in (periods[0].get("replicas") or [])] if periods else []
    # Where the run's replicas were at its first observation, when it matters: an event may hit a node, or the run
    # started below its minimum (the demo starts its job on one executor; the loop adds the others at its first
    # period, a decision the twin must make too). Otherwise the twin keeps the simulator's own first placement,
    # with which the twins' figures of docs/experiments.md were measured.
    if not (names and first_nodes and all(n in names for n in first_nodes) and len(first_nodes) <= max_replicas
            and (on_twin or len(first_nodes) < min_replicas)):
        first_nodes = []
    cold = cold_start_of(periods)
    cpu = cpu_share_of(periods)
    operator = {**operator_of(model, periods, changes), "noise": relative_noise(model),
                **({"cold_start": cold} if cold else {}), **({"cpu": cpu} if cpu else {}),
                "reconfig_pause_s": float(statistics.mean(pauses)) if pauses else 0.0,
                "initial_replicas": len(first_nodes) or max(min_replicas, min(first_n or 1, max_replicas)),
                **({"initial_nodes": first_nodes} if first_nodes else {}),
                **({"reconfig": timing} if timing else {}), **({"latency": "site"} if by_site else {})}
    controller = {**({"latency_source": latency_source} if latency_source != "map" else {}),
                  **({"model_latency": "site"} if by_site else {})}
    scenario = {
        "name": TWIN_NAME,
        "control_period_s": max(1.0, round(period, 3)),
        **({"warmup_s": warmup_s} if warmup_s is not None else {}),
        "cluster": {"latency_map": latency_map if isinstance(latency_map, str) else dict(latency_map),
                    "min_replicas": min_replicas, "max_replicas": max_replicas, **({"site": site} if by_site else {})},
        "operator": operator,
        "workload": {"kind": "steps", "levels": rates or [0.0], "step_s": 1},
        "after_drain": AfterDrain().to_dict(),  # the demo's end of a run (gesscale.run_end)
        "input_end_known": False,  # the live loop is not told when the input ends
        "seed": 1,
        **({"events": on_twin} if on_twin else {}),
        **({"controller": controller} if controller else {}),
    }
    measured = {"control_period_s": round(period, 3), "periods": len(periods),
                "changes": [c.to_dict() for c in changes], "by_kind": timing,
                "input": {"t0_s": round(t0, 3), "seconds": len(rates), "records": round(sum(rates)),
                          "source": source},
                "zero_s": round(zero, 3),  # the twin's t = 0 on the periods' clock
                **({"events": {"run_t0_s": round(float(events_t0_s), 3), "shift_s": round(shift, 3),
                               "given": len(events), "carried": len(on_twin)}} if events else {}),
                "latency_source": latency_source, "model_latency": "site" if by_site else "nd_max",
                "mst_points": len((model or {}).get("measurements") or []),
                "capacity_shown": round(shown_capacity(periods, changes), 3),
                "mst_fit_used": bool(model and model.get("fitted")
                                     and operator["alpha"] == float(model["alpha"])),
                **({"cold_start": cold} if cold else {})}
    return scenario, measured
