"""Partitions and flaps in the userspace engine, the pure parts (issue 32, point 2): the link table's outage keys,
when a link is down, the plans (both directions, the map's t = 0), the daemon's drop decision and counter, the
measurement of a pair that is down as configured, and which fog events `gesscale netem` still warns about."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.latency_map import latency_map_from_dict
from netem.engines import userspace_plans
from netem.hosts import Host
from netem.remote import HostRemote
from netem.run import Options, down_pairs, userspace_service
from netem.userspace.daemon import DelayDaemon
from netem.userspace.health import judge_health
from netem.userspace.nfq import Packet
from netem.userspace.table import Flap, Outages, TableError, table_from_dict
from netem.validate import format_validation, validate

ADDR = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
HOSTS = {n: Host(n, a, a) for n, a in ADDR.items()}
CRASH = {"t_s": 50, "event": "crash", "node": "c", "duration_s": 10}
EVENTS = [{"t_s": 10, "event": "partition", "pairs": [["a", "b"]], "duration_s": 20},
          {"t_s": 40, "event": "flap", "pair": ["b", "c"], "period_s": 6, "down_s": 2, "duration_s": 30},
          CRASH, {"t_s": 100, "event": "partition", "groups": [["a"], ["b", "c"]]}]
LINK_ONLY = [e for e in EVENTS if e is not CRASH]
MAP = {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 20, "c": 40}, "b": {"c": 0}}, "changes": EVENTS}


def _link(**extra):
    return {"delay_ms": 5, "src_addr": "10.0.0.1", "dst_addr": "10.0.0.2", **extra}


# -- the link table ----------------------------------------------------------------------------------------------


def test_the_table_takes_windows_and_flaps_in_map_seconds_from_t0():
    table = table_from_dict({"queue": 1, "t0_unix": 1_795_000_000.5, "links": {"1": _link(
        down=[[60, 90], [300, None]], flaps=[{"from_s": 120, "period_s": 10, "down_s": 2, "until_s": 180}])}})
    out = table.links[1].outages
    assert table.t0_unix == 1_795_000_000.5
    assert out is not None and out.windows == ((60.0, 90.0), (300.0, float("inf")))
    assert out.flaps == (Flap(120.0, 10.0, 2.0, 180.0),)
    assert out.to_dict() == {"down": [[60.0, 90.0], [300.0, None]],
                             "flaps": [{"from_s": 120.0, "period_s": 10.0, "down_s": 2.0, "until_s": 180.0}]}
    plain = table_from_dict({"queue": 1, "links": {"1": _link()}})  # the testbed's tables: no outage, no t0
    assert plain.links[1].outages is None and plain.t0_unix is None


@pytest.mark.parametrize(("extra", "top", "message"), [
    ({"down": [[0, 5]]}, {}, "t0_unix .*needed"),
    ({"down": [[5, 5]]}, {"t0_unix": 1e9}, r"down\[0\]: to_s 5 is not after from_s 5"),
    ({"down": [[-1, 5]]}, {"t0_unix": 1e9}, r"from_s = -1 outside \[0, 1e\+09\]"),
    ({"down": [[1, float("nan")]]}, {"t0_unix": 1e9}, "to_s must be a number or null"),
    ({"down": [[1, float("inf")]]}, {"t0_unix": 1e9}, "to_s = inf outside"),
    ({"down": [[1]]}, {"t0_unix": 1e9}, r"down\[0\] must be \[from_s, to_s\]"),
    ({"down": {"from_s": 1}}, {"t0_unix": 1e9}, "down must be a list"),
    ({"down": [[True, 5]]}, {"t0_unix": 1e9}, "from_s must be a number"),
    ({"flaps": [{"from_s": 0, "period_s": 2, "down_s": 2}]}, {"t0_unix": 1e9}, "down_s 2 is not below period_s 2"),
    ({"flaps": [{"from_s": 0, "period_s": 0, "down_s": 0.5}]}, {"t0_unix": 1e9}, r"period_s = 0 outside \(0"),
    ({"flaps": [{"from_s": 9, "period_s": 2, "down_s": 1, "until_s": 9}]}, {"t0_unix": 1e9}, "until_s 9 is not after"),
    ({"flaps": [{"from_s": 0, "period_s": 2, "down_s": 1, "every": 3}]}, {"t0_unix": 1e9}, "unknown key 'every'"),
    ({"flaps": ["x"]}, {"t0_unix": 1e9}, r"flaps\[0\] must be an object"),
    ({"down": [[i, i + 0.5] for i in range(10_001)]}, {"t0_unix": 1e9}, "more than 10000"),
    ({"down": [[0, 1]]}, {"t0_unix": -1}, "t0_unix must be a wall-clock time"),
    ({"down": [[0, 1]]}, {"t0_unix": "now"}, "t0_unix must be a wall-clock time"),
])
def test_outage_keys_are_validated_with_one_clear_message(extra, top, message):
    with pytest.raises(TableError, match=message) as err:
        table_from_dict({"queue": 1, **top, "links": {"7": _link(**extra)}})
    assert str(err.value).startswith(("link 7: ", "t0_unix")) and "\n" not in str(err.value)


# -- when a link is down -----------------------------------------------------------------------------------------


def test_windows_are_half_open_and_merged():
    out = Outages(((10.0, 20.0), (15.0, 25.0), (40.0, float("inf")), (30.0, 35.0)))
    assert out.windows == ((10.0, 25.0), (30.0, 35.0), (40.0, float("inf")))
    for t, down in [(0.0, False), (9.999, False), (10.0, True), (24.999, True), (25.0, False), (30.0, True),
                    (35.0, False), (39.99, False), (40.0, True), (1e8, True)]:
        assert out.down_at(t) is down, t


def test_a_flap_is_down_for_the_first_down_s_of_each_period_until_it_ends():
    out = Outages(flaps=(Flap(5.0, 4.0, 1.0, 17.0),))
    for t, down in [(4.999, False), (5.0, True), (5.999, True), (6.0, False), (8.999, False), (9.0, True),
                    (13.5, True), (14.0, False), (16.9, False), (17.0, False), (17.5, False), (21.0, False)]:
        assert out.down_at(t) is down, t
    forever = Outages(flaps=(Flap(0.0, 60.0, 10.0),))
    assert forever.down_at(86_400 * 365 + 5) and not forever.down_at(86_400 * 365 + 10)


def test_link_outages_agree_with_the_event_schedule():
    lmap = latency_map_from_dict(MAP)
    plans = userspace_plans(lmap, HOSTS, "lab", t0_unix=1e9)
    sched = lmap.schedule()
    tables = {n: table_from_dict(p.table()) for n, p in plans.items()}
    for t in [0, 9.99, 10, 29.99, 30, 40, 41.99, 42, 46, 48, 69.99, 70, 99.99, 100, 5000]:
        down = sched.down_pairs(t)
        for node, table in tables.items():
            for link in table.links.values():
                cut = link.outages is not None and link.outages.down_at(t)
                assert cut == (frozenset((node, link.dst)) in down), (t, node, link.dst)


# -- the plans -----------------------------------------------------------------------------------------------------


def test_both_directions_of_a_cut_pair_carry_its_outages_even_at_rtt_zero():
    plans = userspace_plans(latency_map_from_dict(MAP), HOSTS, "lab", t0_unix=1e9)
    links = {(n, x.peer): x for n, p in plans.items() for x in p.links}
    assert links[("a", "b")].outages == links[("b", "a")].outages == Outages(((10.0, 30.0), (100.0, float("inf"))))
    assert links[("a", "c")].outages == links[("c", "a")].outages == Outages(((100.0, float("inf")),))
    assert links[("b", "c")].outages == links[("c", "b")].outages == Outages(flaps=(Flap(40.0, 6.0, 2.0, 70.0),))
    # b-c has RTT 0, so it had no rule; its flap needs the daemon: a rule and a link each way
    assert len(plans["b"].rules()) == 2 and len(plans["c"].rules()) == 2
    table = plans["b"].table()
    assert table["t0_unix"] == 1e9
    assert [link["dst"] for link in table["links"].values()] == ["a", "c"]
    assert table["links"]["2"]["delay_ms"] == 0 and table["links"]["2"]["flaps"][0]["until_s"] == 70.0
    assert "down [10, 30) s; down [100, never) s (map time)" in plans["a"].describe()


def test_a_map_without_partitions_or_flaps_gives_the_same_table_as_before():
    lmap = latency_map_from_dict({"nodes": MAP["nodes"], "rtt_ms": MAP["rtt_ms"], "changes": [CRASH]})
    plans = userspace_plans(lmap, HOSTS, "lab", t0_unix=1e9)
    assert "t0_unix" not in plans["a"].table() and len(plans["b"].rules()) == 1
    assert all("down" not in link for link in plans["a"].table()["links"].values())


def test_a_plan_with_outages_needs_the_maps_t0():
    plans = userspace_plans(latency_map_from_dict(MAP), HOSTS, "lab")
    with pytest.raises(ValueError, match="t0_unix"):
        plans["a"].table()


@pytest.mark.parametrize("at_s", [None, 35.0])
def test_the_maps_t0_is_now_minus_at(at_s):
    before = time.time()
    svc = userspace_service(HOSTS, latency_map_from_dict(MAP), HostRemote(), Options(tag="lab", at_s=at_s))  # no I/O
    after = time.time()
    t0 = svc.plans["a"].table()["t0_unix"]
    assert before - (at_s or 0) <= t0 <= after - (at_s or 0)


# -- the daemon ----------------------------------------------------------------------------------------------------


def _ip(src: str, dst: str) -> bytes:
    return bytes([0x45, 0, 0, 84, 0, 0, 0, 0, 64, 1, 0, 0, *map(int, src.split(".")), *map(int, dst.split("."))])


def _daemon(tmp_path: Path, doc: dict) -> DelayDaemon:
    config = tmp_path / "links.json"
    config.write_text(json.dumps(doc))
    return DelayDaemon(config, "gesscale-netem:lab:a", seed=1)


def test_the_daemon_drops_a_down_links_packets_and_counts_them_apart_from_loss(tmp_path):
    # map time now is about 100 s; a-b is down in [50, 200), a-c never
    doc = {"queue": 1, "t0_unix": time.time() - 100.0, "links": {
        "1": {"delay_ms": 5, "src_addr": "10.0.0.1", "dst_addr": "10.0.0.2", "down": [[50, 200]]},
        "2": {"delay_ms": 5, "src_addr": "10.0.0.1", "dst_addr": "10.0.0.3", "down": [[500, 600]]}}}
    daemon = _daemon(tmp_path, doc)
    now = time.monotonic()
    arrived = [(Packet(1, 0, _ip("10.0.0.1", "10.0.0.2")), now), (Packet(2, 0, _ip("10.0.0.1", "10.0.0.3")), now),
               (Packet(3, 0, _ip("10.0.0.1", "10.0.0.9")), now), (Packet(4, 0, _ip("10.0.0.1", "10.0.0.2")), now)]
    passed, dropped = daemon.admit(arrived)
    assert (passed, dropped, len(daemon.held)) == ([3], [1, 4], 1)
    assert {k: daemon.counters[k] for k in ("received", "partitioned", "dropped", "unmatched")} == {
        "received": 4, "partitioned": 2, "dropped": 0, "unmatched": 1}
    assert daemon.stats()["partitioned"] == 2
    # the partition healed (a new table): the pair's packets are held for their delay again
    doc["links"]["1"]["down"] = [[50, 60]]
    (tmp_path / "links.json").write_text(json.dumps(doc))
    daemon.reload()
    assert daemon.admit([(Packet(5, 0, _ip("10.0.0.1", "10.0.0.2")), time.monotonic())]) == ([], [])
    assert len(daemon.held) == 2 and daemon.counters["partitioned"] == 2


def test_the_testbeds_marked_table_is_served_as_before(tmp_path):
    daemon = _daemon(tmp_path, {"queue": 1, "mark_mask": 0x0FFF0000, "mark_shift": 16,
                                "links": {"2": {"delay_ms": 5, "loss_pct": 100}, "3": {"delay_ms": 5}}})
    header = _ip("127.0.0.1", "127.0.0.1")
    now = time.monotonic()
    passed, dropped = daemon.admit([(Packet(1, 0x20000, header), now), (Packet(2, 0x30000, header), now),
                                    (Packet(3, 0x90000, header), now)])
    assert (passed, dropped, len(daemon.held)) == ([3], [1], 1)
    assert (daemon.counters["dropped"], daemon.counters["partitioned"]) == (1, 0)


def test_health_does_not_blame_a_partitioned_link_for_releasing_nothing():
    before = {"queue": 4000, "pids": [10], "pid_file": 10, "queue_bound": True, "rules": 2, "rule_packets": 5,
              "stats": {"pid": 10, "received": 5, "released": 5, "partitioned": 0, "updated": 100.0}, "now": 100.2}
    cut = {**before, "rule_packets": 50, "now": 101.1,
           "stats": {"pid": 10, "received": 50, "released": 5, "partitioned": 45, "updated": 101.0}}
    assert judge_health("a", cut, 2, previous=before).ok


# -- measuring -----------------------------------------------------------------------------------------------------


def test_a_pair_down_at_the_measured_time_must_not_answer():
    lmap = latency_map_from_dict(MAP)
    assert down_pairs(lmap, "userspace", 15.0) == {frozenset("ab")}
    assert down_pairs(lmap, "userspace", None) == set() and down_pairs(lmap, "kernel", 15.0) == set()
    pings = {("a", "b"): (5, []), ("b", "a"): (5, [20.4]), ("a", "c"): (5, [40.2] * 5), ("c", "a"): (5, []),
             ("b", "c"): (5, [0.1] * 5), ("c", "b"): (5, [0.1] * 5)}
    v = validate(lmap, pings, "userspace", 2.0, 10.0, down_pairs(lmap, "userspace", 15.0))
    ok = {(p.src, p.dst): (p.down, p.ok) for p in v.pairs}
    assert ok[("a", "b")] == (True, True)  # down as configured
    assert ok[("b", "a")] == (True, False)  # down, but an echo came back
    assert ok[("a", "c")] == (False, True) and ok[("c", "a")] == (False, False)  # up pairs judged as before
    text = format_validation(v)
    assert "yes (down as configured)" in text and "NO (down, but replies came)" in text
    assert v.to_dict()["pairs"][0]["down"] is True


# -- the warning of `gesscale netem` -------------------------------------------------------------------------------


def _files(tmp_path: Path, events: list[dict], local: bool = True) -> list[str]:
    inv, path = tmp_path / "hosts.yml", tmp_path / "map.yaml"
    conn = ", ansible_connection: local" if local else ""
    inv.write_text("all:\n  hosts:\n" + "".join(f"    {n}: {{ansible_host: 127.0.0.{51 + i}{conn}}}\n"
                                                  for i, n in enumerate("abc")))
    path.write_text(json.dumps({**MAP, "changes": events}))
    return ["-i", str(inv), "-m", str(path)]


def test_netem_warns_only_for_the_node_events_it_does_not_apply(tmp_path, capsys):
    files = _files(tmp_path, EVENTS)
    assert main(["netem", "plan", *files, "--tag", "lab"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == (f"gesscale: warning: {files[3]}: 1 fog event(s) (crash) in changes: are not applied by "
                           "`gesscale netem` (the simulator only, for now: docs/events.md)")
    assert "down [10, 30) s; down [100, never) s (map time)" in out
    assert main(["netem", "plan", *_files(tmp_path, LINK_ONLY), "--tag", "lab"]) == 0
    assert capsys.readouterr().err == ""


def test_the_kernel_engine_says_it_leaves_partitions_and_flaps_out(tmp_path, capsys):
    files = _files(tmp_path, LINK_ONLY, local=False)
    assert main(["netem", "plan", *files, "--engine", "kernel"]) == 0
    err = capsys.readouterr().err
    assert (f"{files[3]}: 3 fog event(s) (flap, partition) in changes: are not applied by the kernel engine" in err)
