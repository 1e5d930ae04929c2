"""The live measured latency map's logic (`gesscale/testbed/latency_monitor.py`) with a fake measurer: no ping, no
group, no testbed. The probes of a round, at most `parallel` in flight, one round per period, the smoother fed,
the view and the log the control loop is given (through the live runner), the CPU against each node's budget,
and the probe's command (`GroupPinger.argv`)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gesscale.config import ControllerConfig
from gesscale.latency_map import LatencyMap, latency_map_from_dict
from gesscale.measured_latency import MeasuredLatency
from gesscale.observation import Placement
from gesscale.runner import LiveRunner, RunnerHooks
from gesscale.testbed.latency_monitor import LatencyMonitor, Probe, ProbeResult, plan_probes
from gesscale.testbed.wan_measure import GroupPinger
from tests.test_runner import PERIOD, FakeBackend, Scripted

FOG = ["n1", "n2", "n3", "n4", "n5", "n6"]
SITE = "hq"
RTT = {"n1": {"n2": 2, "n3": 4, "n4": 10, "n5": 60, "n6": 120, "hq": 5},
       "n2": {"n3": 3, "n4": 12, "n5": 55, "n6": 110, "hq": 6},
       "n3": {"n4": 8, "n5": 50, "n6": 100, "hq": 7},
       "n4": {"n5": 40, "n6": 90, "hq": 8},
       "n5": {"n6": 70, "hq": 9},
       "n6": {"hq": 10}}
PRIOR = latency_map_from_dict({"nodes": [*FOG, SITE], "rtt_ms": RTT}, "prior.yaml")


class FakeNetwork:
    """The measurer: answers each probe with the RTT of `truth` (plus `extra` on some pairs), counts the probes in
    flight at once, and charges `cpu_s` per probe."""

    def __init__(self, cpu_s: float = 0.002, truth: LatencyMap = PRIOR) -> None:
        self.truth = truth
        self.extra: dict[frozenset[str], float] = {}
        self.cut: set[frozenset[str]] = set()
        self.cpu_s = cpu_s
        self.calls: list[Probe] = []
        self.active = 0
        self.most = 0
        self.lock = threading.Lock()
        self.together = 1  # the first probes wait until this many are in flight at once (then none waits)
        self.opened = threading.Event()

    def __call__(self, probe: Probe) -> ProbeResult:
        with self.lock:
            self.calls.append(probe)
            self.active += 1
            self.most = max(self.most, self.active)
            if self.active >= self.together:
                self.opened.set()
        self.opened.wait(timeout=5)
        pair = frozenset((probe.src, probe.dst))
        with self.lock:
            self.active -= 1
        if pair in self.cut:
            return ProbeResult(probe, 3, (), self.cpu_s)
        rtt = self.truth.rtt(probe.src, probe.dst) + self.extra.get(pair, 0.0)
        return ProbeResult(probe, 3, (rtt + 0.3, rtt, rtt + 0.1), self.cpu_s)


def _monitor(net: FakeNetwork, source: str = "measured", parallel: int = 4, **kw: Any) -> LatencyMonitor:
    budgets = dict.fromkeys(FOG, 0.25)
    return LatencyMonitor(MeasuredLatency(PRIOR, source), list(FOG), SITE, net, budgets, PERIOD, parallel=parallel,
                          **kw)


def test_a_round_probes_each_node_to_the_site_and_each_pair_once_spread_over_the_nodes() -> None:
    probes = plan_probes(FOG, SITE)
    assert len(probes) == 6 + 15
    assert {(p.src, p.dst) for p in probes[:6]} == {(n, SITE) for n in FOG}
    pairs = [frozenset((p.src, p.dst)) for p in probes[6:]]
    assert len(set(pairs)) == 15 and all(SITE not in p for p in pairs)
    sent = {n: sum(p.src == n for p in probes) for n in FOG}
    assert max(sent.values()) - min(sent.values()) <= 2  # no node pays for every pair it is in
    assert plan_probes(["a", "b", "c"], "a") == [Probe("b", "a"), Probe("a", "c"), Probe("c", "b")]  # a fog site


def test_no_more_probes_than_parallel_are_in_flight_and_the_bound_is_reached() -> None:
    net = FakeNetwork()
    net.together = 4  # the round's first probes go on only once 4 are in flight together
    monitor = _monitor(net, parallel=4)
    monitor.probe_round(10.0)
    assert len(net.calls) == 21 and net.most == 4


def test_one_round_per_period_however_often_the_loop_asks() -> None:
    net = FakeNetwork()
    monitor = _monitor(net)
    monitor.network(10.0)
    monitor.network(10.0)  # the same period asked twice (e.g. whether the loop is in its warm-up)
    monitor.network(12.0)  # less than half a period later
    assert len(monitor.rounds) == 1 and len(net.calls) == 21
    monitor.network(20.0)
    assert [r.time_s for r in monitor.rounds] == [10.0, 20.0]


def test_the_smoother_is_fed_and_the_view_over_the_fog_nodes_follows_a_degradation_within_two_periods() -> None:
    net = FakeNetwork()
    monitor = _monitor(net)
    first = monitor.network(10.0)
    assert sorted(first.names) == FOG  # the site is measured, but the loop reasons on the fog nodes
    assert first.rtt("n1", "n2") == pytest.approx(2.1)  # the median of the probe's replies
    assert monitor.network_log(10.0) == ()  # within 5 ms of the map: nothing logged
    net.extra = {frozenset(("n1", p)): 60.0 for p in [*FOG, SITE] if p != "n1"}  # n1's links degrade
    assert monitor.network(20.0).rtt("n1", "n2") == pytest.approx(2.1)  # one sample: not taken yet
    view = monitor.network(30.0)
    assert view.rtt("n1", "n2") == pytest.approx(62.1) and view.rtt("n2", "n3") == pytest.approx(3.1)
    logged = monitor.network_log(30.0)
    assert {(c.a, c.b) for c in logged} == {("n1", p) for p in [*FOG[1:], SITE]}
    assert all(c.time_s == 30.0 and c.new_ms - c.old_ms > 55 for c in logged)
    assert monitor.network(30.0) is view  # the same view object while nothing changes (the loop's graph is kept)


def test_a_cut_pair_keeps_its_last_value_and_is_counted_unreachable() -> None:
    net = FakeNetwork()
    monitor = _monitor(net)
    monitor.network(10.0)
    net.cut = {frozenset(("n2", "n3"))}
    view = monitor.network(20.0)
    assert view.rtt("n2", "n3") == pytest.approx(3.1)
    assert monitor.rounds[-1].unreachable == [p for p in monitor.probes if {p.src, p.dst} == {"n2", "n3"}]
    assert monitor.summary()["unreachable_probes"] == 1


def test_a_failing_probe_is_a_pair_without_sample_not_a_failed_period() -> None:
    def broken(probe: Probe) -> ProbeResult:
        raise OSError("no such group")

    monitor = _monitor(broken)  # type: ignore[arg-type]
    view = monitor.network(10.0)
    assert view.rtt("n1", "n2") == 10_000.0  # measured: a pair never measured is unknown
    assert monitor.rounds[0].to_dict()["errors"]["n1->hq"] == "OSError: no such group"
    both = _monitor(broken, source="both").network(10.0)  # type: ignore[arg-type]
    assert both.rtt("n1", "n2") == 2.0  # both: the map stands in


def test_each_nodes_probe_cpu_is_reported_against_its_budget_over_the_period() -> None:
    net = FakeNetwork(cpu_s=0.005)
    rounds: list[dict[str, Any]] = []
    monitor = _monitor(net, on_round=lambda r: rounds.append(r.to_dict()))
    monitor.network(10.0)
    monitor.network(25.0)  # a longer period: a larger budget
    per_node = {n: sum(p.src == n for p in monitor.probes) for n in FOG}
    first, second = monitor.rounds
    assert first.cpu_s == pytest.approx({n: 0.005 * k for n, k in per_node.items()})
    assert first.budget_s == {n: 0.25 * PERIOD for n in FOG} and second.budget_s == {n: 0.25 * 15.0 for n in FOG}
    assert second.cpu_share()["n1"] == pytest.approx(0.005 * per_node["n1"] / 3.75)
    summary = monitor.summary()
    assert summary["rounds"] == 2 and summary["probes_per_round"] == 21
    assert summary["cpu_share_of_budget"]["n1"]["max"] == pytest.approx(0.005 * per_node["n1"] / 2.5, abs=1e-5)
    assert [r["t_s"] for r in rounds] == [10.0, 25.0] and rounds[0]["answered"] == 21


def test_the_live_runner_gives_the_loop_the_measured_view_and_logs_its_changes(tmp_path: Path) -> None:
    net = FakeNetwork()
    monitor = _monitor(net)
    hooks = RunnerHooks(network=monitor.network, network_log=monitor.network_log)
    backend = FakeBackend(replicas=("n1",))
    runner = LiveRunner(backend, Scripted([1, 1, 1, 1]), PRIOR.subset(FOG),
                        ControllerConfig(control_period_s=PERIOD, warmup_s=0.0, max_replicas=6), None, hooks=hooks)
    runner.run(max_steps=1)
    net.extra = {frozenset(("n1", "n2")): 80.0}
    history = runner.run(max_steps=3)
    assert [r.observation.time_s for r in history] == [10.0, 20.0, 30.0, 40.0]
    assert [len(r.network_changes) for r in history] == [0, 0, 1, 0]  # seen at the second sample
    change = history[2].network_changes[0]
    assert (change.a, change.b, change.time_s) == ("n1", "n2", 30.0)
    assert runner.loop.current_map.rtt("n1", "n2") == pytest.approx(82.1)  # the loop reasons on the view
    assert [r.time_s for r in monitor.rounds] == [10.0, 20.0, 30.0, 40.0]


def test_the_probe_joins_the_nodes_network_group_then_its_budget_groups_then_pings() -> None:
    pinger = GroupPinger({"fog1": "127.0.0.31", "fog2": "127.0.0.32"}, Path("/cg/net"), "site",
                         lambda n: [Path(f"/cg/cpu/{n}/cgroup.procs")] if n == "fog1" else [])
    argv = pinger.argv("fog1", "fog2")
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[3:6] == ["probe", "/cg/net/fog1/cgroup.procs", "/cg/cpu/fog1/cgroup.procs"]
    assert argv[6:] == ["ping", "-n", "-c", "3", "-i", "0.1", "-W", "2", "127.0.0.32", "-w", "3"]
    assert argv[2].startswith('echo 0 > "$1" && ') and "shift 2" in argv[2]
    to_site = pinger.argv("fog2", "site")  # fog2 has no budget group now (its worker stopped)
    assert to_site[3:5] == ["probe", "/cg/net/fog2/cgroup.procs"] and to_site[-3] == "127.0.0.1"
    assert "shift 1" in to_site[2]


def test_the_runs_console_summary_gives_the_events_on_the_controllers_clock_and_the_monitors_cost(
        tmp_path: Path) -> None:
    from types import SimpleNamespace

    from gesscale.testbed.controller import run_network_summary

    net = FakeNetwork(cpu_s=0.01)
    monitor = _monitor(net)
    monitor.network(10.0)
    monitor.network(20.0)
    wan = SimpleNamespace(outages_applied=[], changes_applied=[
        {"t_s": 90.0, "at": 1000.0 + 150.2, "late_s": 0.004,
         "links": [{"src": "fog1", "dst": "fog2", "rtt_ms": [1.7, 61.7]}]}])
    lines = run_network_summary(wan, monitor, tmp_path, t0_unix=1000.0)
    assert lines[0] == ("network: the change due at t=90 s of the run applied at 150.2 s on the controller's clock "
                        "(SIGHUP +0.004 s after due): fog1->fog2 1.7->61.7 ms")
    most = max(sum(p.src == n for p in monitor.probes) for n in FOG) * 0.01 / (0.25 * PERIOD)
    assert lines[1].startswith("latency monitor: 2 rounds of 21 probes") and f"{100 * most:.2f} %" in lines[1]
    assert json.loads((tmp_path / "network-monitor.json").read_text())["rounds"] == 2


class _CannedPinger(GroupPinger):
    """The probe with its command replaced by one printing a ping's output: the run, the parsing and the rusage
    path of `GroupPinger.__call__` without a group or a ping."""

    def __init__(self, output: str, code: int = 0) -> None:
        super().__init__({"fog1": "127.0.0.31"}, Path("/cg"), "site", lambda n: [])
        self.output, self.code = output, code

    def argv(self, src: str, dst: str) -> list[str]:
        return ["/bin/sh", "-c", 'printf "%s" "$1"; exit "$2"', "canned", self.output, str(self.code)]


def test_the_probe_reads_the_replies_and_its_own_cpu_and_reaps_its_process() -> None:
    out = ("PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n"
           "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=61.9 ms\n"
           "64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=61.7 ms\n"
           "64 bytes from 127.0.0.1: icmp_seq=3 ttl=64 time=62.4 ms\n\n"
           "--- 127.0.0.1 ping statistics ---\n"
           "3 packets transmitted, 3 received, 0% packet loss, time 202ms\n")
    got = _CannedPinger(out)(Probe("fog1", "site"))
    assert (got.sent, got.times_ms, got.rtt_ms, got.error) == (3, (61.9, 61.7, 62.4), 61.9, "")
    assert got.cpu_s >= 0.0
    cut = _CannedPinger("3 packets transmitted, 0 received, 100% packet loss, time 2040ms\n", code=1)
    res = cut(Probe("fog1", "site"))
    assert (res.sent, res.rtt_ms, res.error) == (3, None, "")  # no reply: unreachable, not a failed probe
    failed = _CannedPinger("", code=2)(Probe("fog1", "site"))
    assert failed.sent == 0 and failed.error == "the probe did not run (exit 2)"


def test_rounds_go_on_every_period_while_the_loop_is_blocked_and_their_changes_reach_it_once() -> None:
    # A reconfiguration blocks the loop for several periods; the links degrade meanwhile. The background rounds
    # (`start`) detect it, and the loop's next observation sees the degraded view and logs the change once.
    net = FakeNetwork()
    clock = {"t": 10.0}
    monitor = LatencyMonitor(MeasuredLatency(PRIOR, "measured"), list(FOG), SITE, net, dict.fromkeys(FOG, 0.25), 0.05,
                             parallel=4)
    monitor.network(10.0)  # the loop's observation at 10 s, then it blocks (no call for a while)
    net.extra = {frozenset(("n1", p)): 60.0 for p in [*FOG, SITE] if p != "n1"}

    def now() -> float:
        clock["t"] += 0.05  # the controller's clock advances a period per background round
        return clock["t"]

    monitor.start(now)
    deadline = time.monotonic() + 5
    while len(monitor.rounds) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    monitor.stop()
    assert len(monitor.rounds) >= 4  # rounds without the loop asking
    rounds_then = len(monitor.rounds)
    time.sleep(0.15)
    assert len(monitor.rounds) == rounds_then  # stopped
    view = monitor.network(clock["t"] + 0.01)  # the loop observes again: the change is already in its view
    assert view.rtt("n1", "n2") == pytest.approx(62.1)
    logged = monitor.network_log(clock["t"])
    assert {(c.a, c.b) for c in logged} == {("n1", p) for p in [*FOG[1:], SITE]}
    assert all(10.0 < c.time_s <= clock["t"] for c in logged)  # logged at the background round's time
    assert monitor.network_log(clock["t"] + 1) == ()  # handed over once


# -- the backend's ND_max follows the measured network (`LocalBackend.follow_network`) ----------------------------
FOG3 = ["fog1", "fog2", "fog3"]
FOG3_PRIOR = latency_map_from_dict({"nodes": [*FOG3, SITE], "rtt_ms": {
    "fog1": {"fog2": 2, "fog3": 5, SITE: 1}, "fog2": {"fog3": 4, SITE: 1}, "fog3": {SITE: 1}}}, "prior.yaml")


def _fog_monitor(net: FakeNetwork, source: str) -> LatencyMonitor:
    """A monitor over the node-events stand-ins' fog (`tests.testbed.test_node_events`) and a site."""
    return LatencyMonitor(MeasuredLatency(FOG3_PRIOR, source), list(FOG3), SITE, net, dict.fromkeys(FOG3, 0.25),
                          PERIOD)


@pytest.mark.parametrize("source", ["measured", "both"])
def test_the_backend_labels_nd_max_with_the_measured_network_once_the_controller_wires_the_monitor(
        tmp_path: Path, source: str) -> None:
    # fog1-fog2 degrade to 62 ms without the map saying so: the observation and the reconfiguration record carry
    # the measured ND_max (the model's points), not the map's 2 ms
    from gesscale.testbed.controller import LiveController
    from tests.testbed.test_node_events import backend

    be, _, _ = backend(tmp_path, None, ["fog1", "fog2"])
    net = FakeNetwork(truth=FOG3_PRIOR)
    monitor = _fog_monitor(net, source)
    assert be.current().nd_max_ms == 2.0  # nothing measured yet: the map
    LiveController(be, "gesscale", be.latency_map, ControllerConfig(control_period_s=PERIOD, max_replicas=3),
                   tmp_path / "controller.json", [], monitor=monitor)
    assert be.current().nd_max_ms == 2.0 and not monitor.rounds  # still the map; labelling probes nothing
    net.extra = {frozenset(("fog1", "fog2")): 60.0}
    monitor.probe_round(10.0)
    monitor.probe_round(20.0)  # two samples of the new value: taken
    rounds = len(monitor.rounds)
    assert be.observe().nd_max_ms == pytest.approx(62.1)
    assert be.current().nd_max_ms == pytest.approx(62.1) and len(monitor.rounds) == rounds
    be.apply(Placement(("fog1", "fog2", "fog3"), 0.0))
    assert be.reconfigurations[-1].nd_max_ms == pytest.approx(62.1)
    assert monitor.seen(20.0).rtt("fog2", "fog3") == pytest.approx(4.1)  # measured, every pair


def test_the_monitors_seen_view_takes_the_map_where_nothing_was_measured_and_never_probes() -> None:
    net = FakeNetwork(truth=FOG3_PRIOR)
    monitor = _fog_monitor(net, "measured")
    assert monitor.seen(5.0).rtt("fog1", "fog2") == 2.0 and net.calls == []  # before any round: the map
    net.cut = {frozenset(("fog1", "fog3"))}
    monitor.probe_round(10.0)
    seen = monitor.seen(10.0)
    assert seen.rtt("fog1", "fog3") == 5.0  # never answered: the map, where the loop's view has it unknown
    assert monitor.network(10.0).rtt("fog1", "fog3") == 10_000.0
    assert seen.rtt("fog1", "fog2") == pytest.approx(2.1) and sorted(seen.names) == FOG3
    assert monitor.seen(10.0) is seen and len(monitor.rounds) == 1


def test_the_links_of_a_node_out_are_not_probed_and_keep_their_value_until_it_is_back(tmp_path: Path) -> None:
    # fog2 crashes: the monitor the runs build (`live_monitor`) asks the backend which nodes are out and probes
    # none of fog2's links (no CPU charged to a dead node's groups, nothing logged for its pairs, whatever its
    # groups would answer) until the node is back; then they are measured again
    from types import SimpleNamespace

    from gesscale.testbed.controller import live_monitor
    from gesscale.testbed.node_events import NodeAction
    from tests.testbed.test_node_events import backend, schedule

    be, fleet, _ = backend(tmp_path, schedule({"t_s": 10, "event": "crash", "node": "fog2", "duration_s": 100}),
                           ["fog1", "fog2"], run_s=10.0)
    fleet.cgroups = SimpleNamespace(budgets={})  # type: ignore[attr-defined]
    monitor = live_monitor(be, SimpleNamespace(site=SITE, groups=SimpleNamespace(parent=tmp_path)), FOG3_PRIOR,
                           "measured", PERIOD)
    net = FakeNetwork(truth=FOG3_PRIOR)
    monitor.measure = net
    monitor.probe_round(10.0)
    assert len(net.calls) == 6 and monitor.rounds[-1].out == ()
    be.node_event(NodeAction(10.0, "crash", "fog2"))
    net.extra = {frozenset(("fog2", p)): 300.0 for p in ["fog1", "fog3", SITE]}  # whatever it would answer
    net.calls.clear()
    for t in (20.0, 30.0, 40.0, 50.0):
        monitor.probe_round(t)
    assert len(net.calls) == 4 * 3 and all("fog2" not in (p.src, p.dst) for p in net.calls)
    assert monitor.network_log(50.0) == () and monitor.network(50.0).rtt("fog1", "fog2") == pytest.approx(2.1)
    last = monitor.rounds[-1].to_dict()
    assert last["out"] == ["fog2"] and last["probes"] == 3 and "fog2" not in last["cpu_s"]
    be.started_s = time.time() - 110.0
    be.node_event(NodeAction(110.0, "back", "fog2"))
    monitor.probe_round(110.0)
    monitor.probe_round(120.0)
    assert {("fog2" in (p.src, p.dst)) for p in net.calls[-12:]} == {True, False}  # measured again
    assert {(c.a, c.b) for c in monitor.network_log(120.0)} == {("fog1", "fog2"), ("fog2", "fog3"), ("fog2", SITE)}
