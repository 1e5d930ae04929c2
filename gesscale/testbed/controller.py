"""The live runner on the local testbed: `gesscale.runner.LiveRunner` with what the testbed adds.

Shared by `gesscale run --backend local` and `gesscale demo`. The testbed adds three things to the generic
runner: the warm-up runs from when a change took effect (a worker JVM starts, an executor registers: tens of
seconds after the observation that asked for it), the policy sees the latency map in force at each moment (the
operator's map with its own `changes:`; with `--latency-source measured|both`, the map kept from RTTs measured
every period through the WAN emulation: `live_monitor`), and each line of `reconfigurations.jsonl` carries the
strategy and the change's measured timing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.events import EventSchedule
from gesscale.latency_map import LatencyMap
from gesscale.mape import StepRecord
from gesscale.model import PerformanceModel
from gesscale.observation import Reconfiguration
from gesscale.options import parse_duration_text
from gesscale.policies.base import make_policy
from gesscale.runner import LiveRunner, RunnerHooks, read_reconfigurations, start_from_model
from gesscale.testbed.backend import LocalBackend
from gesscale.testbed.latency_monitor import LatencyMonitor, RoundReport

__all__ = ["LiveController", "parse_duration", "read_reconfigurations", "start_from_model"]

def parse_duration(text: str, what: str = "duration") -> float:
    """A positive duration (`10s`, `1.5m`, `2h`, `500ms` or a bare number of seconds) in seconds, as the options'
    parser reads it (gesscale.options); UserError otherwise."""
    value = parse_duration_text(text, what)
    if value <= 0:
        raise UserError(f"{what} must be positive")
    return value


def map_time(backend: LocalBackend) -> Callable[[float], float]:
    """The controller's clock (seconds since the testbed started) as the map's (seconds since the run started:
    the t = 0 of its `changes:` and of the run's events)."""
    def at(now_s: float) -> float:
        return max(0.0, now_s + backend.fleet.state.t0 - backend.started_s)

    return at


def testbed_hooks(backend: LocalBackend, latency_map: LatencyMap, monitor: LatencyMonitor | None = None
                  ) -> RunnerHooks:
    """The testbed's additions to the live runner (see the module docstring); with a `monitor`, the controller
    sees the network it measures (`--latency-source measured|both`) and the changes it logged go into the
    periods' records."""
    network: Callable[[float], LatencyMap] | None = None
    network_log = None
    unconfirmed = None
    if monitor is not None:
        network, network_log, unconfirmed = monitor.network, monitor.network_log, monitor.unconfirmed
    elif latency_map.change_times:  # the policy sees the map in force, as the emulation applies it
        to_map = map_time(backend)

        def network(now_s: float) -> LatencyMap:
            return latency_map.at(to_map(now_s))

    def log_fields(rec: Reconfiguration) -> dict[str, Any]:
        measured = backend.reconfigurations[-1] if backend.reconfigurations else None
        return rec.with_measurement(measured, strategy=backend.strategy).to_dict()

    return RunnerHooks(network=network, effective_at=backend.now_s, log_fields=log_fields, network_log=network_log,
                       network_unconfirmed=unconfirmed)


def live_monitor(backend: LocalBackend, wan: Any, prior_map: LatencyMap, source: str, period_s: float,
                 record: Path | None = None) -> LatencyMonitor:
    """The measured latency map of a live run on the testbed (`gesscale.testbed.latency_monitor`): probes from
    every fog node's groups through the WAN emulation `wan`, smoothed over the controller's map `prior_map` (the
    operator's: its own `changes:`, never the run's events) restricted to the fog nodes and the site. Each round
    is appended to `record` (JSON lines). The nodes the backend has out (crashed, gone, not yet joined) are not
    probed."""
    from gesscale.measured_latency import MeasuredLatency
    from gesscale.testbed.wan_measure import GroupPinger

    if wan is None:
        raise UserError(f"--latency-source {source} measures the links through the WAN emulation; run with --wan")
    fleet = backend.fleet
    fog = list(fleet.names)
    kept = fog if wan.site in fog else [*fog, wan.site]
    measured = MeasuredLatency(prior_map.subset(kept), source)

    def budget_procs(node: str) -> list[Path]:
        budget = fleet.cgroups.budgets.get(node)
        return [d / "cgroup.procs" for d in budget.dirs] if budget is not None else []

    pinger = GroupPinger({n: fleet.host_of(n) for n in fog}, wan.groups.parent, wan.site, budget_procs)

    def write(report: RoundReport) -> None:
        if record is not None:
            with record.open("a") as fh:
                fh.write(json.dumps({**report.to_dict(), "unix": round(time.time(), 3)}) + "\n")

    return LatencyMonitor(measured, fog, wan.site, pinger, {n: fleet.state.nodes[n].cores for n in fog},
                          period_s, map_time=map_time(backend), on_round=write, out=backend.out_nodes)


class LiveController(LiveRunner):
    """A live runner on a LocalBackend with the testbed's hooks (`testbed_hooks`).

    `initial_model` (e.g. from `gesscale calibrate --backend local`) is the policy's starting model, unless the
    controller resumes from a state that holds a fitted model (`LiveRunner`). `monitor` (`live_monitor`) gives the
    controller the network it measures instead of the map, and the backend the ND_max it labels observations and
    reconfigurations with (`LocalBackend.follow_network`).
    """

    def __init__(self, backend: LocalBackend, policy_id: str, latency_map: LatencyMap, config: ControllerConfig,
                 state_path: Path, listeners: list[Callable[[StepRecord, dict[str, Any] | None], None]],
                 initial_model: PerformanceModel | None = None, policy_options: dict[str, Any] | None = None,
                 monitor: LatencyMonitor | None = None) -> None:
        policy = make_policy(policy_id, **(policy_options or {}))
        super().__init__(backend, policy, latency_map, config, Path(state_path), listeners,
                         testbed_hooks(backend, latency_map, monitor), initial_model)
        self.backend: LocalBackend = backend
        self.monitor = monitor  # the measured latency map (`--latency-source measured|both`), None with `map`
        if monitor is not None:  # the backend labels ND_max with the network as measured, not as the map says
            backend.follow_network(monitor.seen)

    def run(self, until: Callable[[], bool] | None = None, max_steps: int | None = None,
            catch_interrupt: bool = False) -> list[StepRecord]:
        """The live runner's `run`, with the monitor's rounds going on every period while it runs (also while a
        reconfiguration blocks the loop)."""
        if self.monitor is None:
            return super().run(until, max_steps, catch_interrupt)
        t0 = self.backend.fleet.state.t0
        self.monitor.start(lambda: time.time() - t0)
        try:
            return super().run(until, max_steps, catch_interrupt)
        finally:
            self.monitor.stop()


def fog_events(lmap: LatencyMap, events: Path | None, *, owned: bool, wan: bool,
               command: str) -> tuple[LatencyMap, str | None]:
    """The map the fog follows (the operator's map with the run's `--events` merged in: what happens to the fog)
    and the warning to print (None: nothing left unapplied). The controller keeps `lmap`.

    `--events` needs a testbed this run brings up with its WAN emulation (the emulation follows the link events
    from the run's t = 0); one line, exit 2, otherwise. Such a run applies every kind: the link events on the
    emulation, the node events through the backend (`node_schedule`); without one, the map's own events are
    warned about."""
    from gesscale.latency_map import read_events

    if events is not None and not owned:
        raise UserError("--events applies to a testbed this run brings up (its WAN emulation follows the events "
                        "from the run's start); it cannot be given with --testbed")
    if events is not None and not wan:
        raise UserError("--events needs the WAN emulation (--wan): link changes, partitions and flaps act on it")
    fog = lmap.with_events(read_events(events), str(events)) if events is not None else lmap
    if not (owned and wan):  # nothing applies any event: the map's own, as before
        return fog, lmap.unapplied_events(command)
    return fog, None


def node_schedule(fog_map: LatencyMap, *, owned: bool, wan: bool) -> EventSchedule | None:
    """The node events the run's backend acts out (`LocalBackend(events=...)`): those of `fog_map` (as
    `fog_events` gave it) on a testbed this run brings up with its WAN emulation, else none (`fog_events` warned)."""
    if not (owned and wan):
        return None
    schedule = fog_map.schedule()
    return None if schedule.empty else schedule


def node_event_lines(applied: list[dict[str, Any]], reconfigurations: list[dict[str, Any]],
                     t0_unix: float) -> list[str]:
    """One console line per node event the run applied (`NodeEventDriver.applied`), on the controller's clock
    (0 = the testbed's start `t0_unix`), with when a replica it took away was replaced (`replacement_times`)."""
    from gesscale.testbed.node_events import replacement_times

    replaced = {(r["node"], r["lost_s"]): r for r in replacement_times(applied, reconfigurations, t0_unix)}
    lines = []
    for e in applied:
        at = e["at"] - t0_unix
        line = (f"node event: {e['action']} {e['node']} due at t={e['t_s']:g} s of the run, applied at {at:.1f} s "
                f"on the controller's clock ({e['late_s']:+.3f} s)")
        if "error" in e:
            line += f": failed ({e['error']})"
        elif e["action"] == "crash":
            line += f": {e.get('killed_pids', 0)} process(es) killed in {e.get('kill_s', 0):g} s"
        if e.get("lost"):
            r = replaced.get((e["node"], round(at, 3)))
            line += "; its replica lost" + (
                f", replaced by {','.join(r['replaced_by'])} (effective {r['replaced_after_s']:g} s after the loss)"
                if r is not None and r["replaced_after_s"] is not None else ", not replaced")
        lines.append(line)
    return lines


def run_network_summary(wan: Any, monitor: LatencyMonitor | None, run_dir: Path, t0_unix: float,
                        reconfigurations: Path | None = None) -> list[str]:
    """What the run did to the network and the nodes and saw of it, a few lines for the console (times on the
    controller's clock, whose 0 is the testbed's start `t0_unix`); the monitor's summary is also written to
    `<run_dir>/network-monitor.json`. Node events are read from `<run_dir>/node-events.jsonl`, the replacements
    from `reconfigurations` (default `<run_dir>/reconfigurations.jsonl`)."""
    from gesscale.testbed.node_events import RECORD_FILE

    lines = []
    applied = read_reconfigurations(run_dir / RECORD_FILE)  # the same JSON-lines reader
    if applied:
        lines += node_event_lines(applied, read_reconfigurations(reconfigurations or run_dir /
                                                                 "reconfigurations.jsonl"), t0_unix)
    if wan is not None and (wan.changes_applied or wan.outages_applied):
        for e in wan.outages_applied:
            lines.append(f"network: partitions/flaps from t0 {e['t0_unix']:.3f} (SIGHUP at {e['at']:.3f}): "
                         + "; ".join(f"{x['src']}->{x['dst']} {x['schedule']}" for x in e["links"]))
        for e in wan.changes_applied:
            lines.append(f"network: the change due at t={e['t_s']:g} s of the run applied at {e['at'] - t0_unix:.1f} s "
                         f"on the controller's clock (SIGHUP {e.get('late_s', 0):+.3f} s after due): "
                         + ", ".join(f"{x['src']}->{x['dst']} {x['rtt_ms'][0]:g}->{x['rtt_ms'][1]:g} ms"
                                     for x in e.get("links", [])))
    if monitor is not None:
        doc = monitor.summary()
        (run_dir / "network-monitor.json").write_text(json.dumps(doc, indent=1))
        worst = max((v["max"] for v in doc["cpu_share_of_budget"].values()), default=0.0)
        lines.append(f"latency monitor: {doc['rounds']} rounds of {doc['probes_per_round']} probes, round "
                     f"{doc['round_s']['mean']} s mean / {doc['round_s']['max']} s max, CPU at most "
                     f"{100 * worst:.2f} % of a node's budget, {len(doc['changes'])} change(s) logged "
                     f"({run_dir / 'network-monitor.json'})")
    return lines
