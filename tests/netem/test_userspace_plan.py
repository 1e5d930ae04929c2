"""The userspace engine's pure parts: per-node plans and rule text, the link table, release times, health verdicts,
engine choice, and the kernel plan's link properties."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from netem.engines import pick_engine, userspace_plans
from netem.hosts import Host
from netem.plan import build_plan
from netem.probe import NetemSupport
from netem.userspace.health import judge_health
from netem.userspace.launch import daemon_argv
from netem.userspace.model import ReleaseModel
from netem.userspace.rules import QUEUE_BASE, check_tag, parse_rules
from netem.userspace.table import TableError, flow_key, table_from_dict

MAP = {
    "nodes": ["a", "b", "c"],
    "rtt_ms": {"a": {"b": 20, "c": 40}, "b": {"c": 0}},
    "links": {"a": {"c": {"jitter_ms": 2, "loss_pct": 1, "bandwidth_mbit": 50}}},
}
HOSTS = {n: Host(n, f"10.0.0.{i + 1}", f"10.0.0.{i + 1}") for i, n in enumerate("abc")}


def test_each_node_holds_half_the_rtt_toward_each_peer_and_skips_zero_links():
    plans = userspace_plans(latency_map_from_dict(MAP), HOSTS, "lab")
    a, b = plans["a"], plans["b"]
    assert [(x.peer, x.delay_ms, x.jitter_ms, x.loss_pct, x.bandwidth_mbit) for x in a.links] == [
        ("b", 10.0, 0.0, 0.0, None), ("c", 20.0, 2.0, 1.0, 50)]
    assert (a.queue, b.queue, plans["c"].queue) == (QUEUE_BASE, QUEUE_BASE + 1, QUEUE_BASE + 2)
    assert len(b.rules()) == 1  # b-c has RTT 0: no rule, no link
    assert list(b.table()["links"].values())[0]["dst_addr"] == "10.0.0.1"


def test_rules_text_is_what_iptables_prints_back():
    plan = userspace_plans(latency_map_from_dict(MAP), HOSTS, "lab", queue_bypass=True)["a"]
    assert plan.rules_text().splitlines()[0] == (
        "iptables -w -t mangle -A OUTPUT -s 10.0.0.1/32 -d 10.0.0.2/32 -m comment --comment gesscale-netem:lab:a "
        "-j NFQUEUE --queue-num 4000 --queue-bypass")
    printed = ('-A OUTPUT -s 10.0.0.1/32 -d 10.0.0.2/32 -m comment --comment "gesscale-netem:lab:a" -c 7 588 '
               "-j NFQUEUE --queue-num 4000 --queue-bypass\n"
               '-A OUTPUT -s 10.0.0.1/32 -m comment --comment "gesscale-netem:lab:ab" -j ACCEPT\n'
               '-A OUTPUT -s 10.0.0.1/32 -m comment --comment "other" -j ACCEPT\n'
               "-A OUTPUT -s 10.0.0.9/32 -j ACCEPT\n")
    ours = parse_rules(printed, plan.label)
    assert ours == [(plan.rules()[0], 7)]
    assert [r[r.index("--comment") + 1] for r, _ in parse_rules(printed, "gesscale-netem:lab:")] == [
        "gesscale-netem:lab:a", "gesscale-netem:lab:ab"]


@pytest.mark.parametrize("bad", [{"a": "10.0.0.1; reboot"}, {"b": "fe80::1"}])
def test_values_reaching_a_rule_are_validated(bad):
    hosts = {n: Host(n, "x", bad.get(n, h.address)) for n, h in HOSTS.items()}
    with pytest.raises(UserError, match="not an IPv4 address"):
        userspace_plans(latency_map_from_dict(MAP), hosts, "lab")


@pytest.mark.parametrize("tag", ["tb123", "a b", "x" * 21, "", "gesscale;rm"])
def test_tags_are_strict_and_the_testbeds_are_reserved(tag):
    with pytest.raises(UserError):
        check_tag(tag)


def test_table_validation_and_classification():
    plan = userspace_plans(latency_map_from_dict(MAP), HOSTS, "lab")["a"]
    table = table_from_dict(plan.table())
    header = bytes([0x45, 0, 0, 84, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 3])
    assert table.classify(header).dst == "c"
    assert table.classify(header[:16] + bytes([10, 0, 0, 9])) is None
    marked = table_from_dict({"queue": 1, "mark_mask": 0x0FFF0000, "mark_shift": 16,
                              "links": {"2": {"delay_ms": 5}}})
    assert marked.classify(header, 0x20000 | 0x7).delay_ms == 5 and marked.classify(header, 0x30000) is None
    for doc, msg in [({"queue": -1}, "queue"), ({"queue": 1, "links": {"1": {"delay_ms": "x"}}}, "number"),
                     ({"queue": 1, "links": {"1": {"delay_ms": 1, "jitter_ms": 2, "src_addr": "1.1.1.1",
                                                    "dst_addr": "1.1.1.2"}}}, "jitter"),
                     ({"queue": 1, "links": {"1": {"delay_ms": 1}}}, "src_addr")]:
        with pytest.raises(TableError, match=msg):
            table_from_dict(doc)


def _tcp(sport: int) -> bytes:
    head = bytes([0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    return head + sport.to_bytes(2, "big") + b"\0P"


def test_jitter_never_reorders_a_flow_unless_asked():
    link = table_from_dict({"queue": 1, "links": {"1": {"delay_ms": 10, "jitter_ms": 9, "src_addr": "10.0.0.1",
                                                         "dst_addr": "10.0.0.2"}}}).links[1]
    flow = flow_key(_tcp(1000))
    assert flow != flow_key(_tcp(1001))
    ordered, free = ReleaseModel(seed=1), ReleaseModel(reorder=True, seed=1)
    arrivals = [i * 0.0005 for i in range(400)]  # 2 000 packets/s, much closer than the jitter
    kept = [ordered.release_at(link, flow, t) for t in arrivals]
    loose = [free.release_at(link, flow, t) for t in arrivals]
    assert kept == sorted(kept)
    assert loose != sorted(loose)  # netem's behaviour: overtaking
    assert all(0.001 <= r - t <= 0.019 + 1e-9 for r, t in zip(loose, arrivals, strict=True))
    ordered.forget_before(max(kept) + 1)
    assert ordered.flows == 0


def test_loss_drops_about_the_configured_share():
    link = table_from_dict({"queue": 1, "links": {"1": {"delay_ms": 1, "loss_pct": 20, "src_addr": "10.0.0.1",
                                                         "dst_addr": "10.0.0.2"}}}).links[1]
    model = ReleaseModel(seed=7)
    lost = sum(model.release_at(link, b"f", 0.0) is None for _ in range(5000))
    assert 900 < lost < 1100


def _snap(**kw):
    base = {"queue": 4000, "pids": [10], "pid_file": 10, "queue_bound": True, "rules": 2, "rule_packets": 5,
            "stats": {"pid": 10, "received": 5, "updated": 100.0}, "now": 100.2}
    return {**base, **kw}


def test_health_names_what_is_wrong():
    assert judge_health("a", _snap(), 2).ok
    dead = judge_health("a", _snap(pids=[], pid_file=None, queue_bound=False), 2)
    assert "no delay daemon is running" in dead.problems and "nothing listens on NFQUEUE 4000" in dead.problems
    assert not judge_health("a", _snap(rules=1), 2).ok
    assert "hung" in judge_health("a", _snap(now=110.0), 2).problems[0]
    later = _snap(rule_packets=50, stats={"pid": 10, "received": 5, "updated": 101.0}, now=101.1)
    assert "matched 45 packets" in judge_health("a", later, 2, previous=_snap()).problems[0]
    moving = _snap(rule_packets=50, stats={"pid": 10, "received": 50, "updated": 101.0}, now=101.1)
    assert judge_health("a", moving, 2, previous=_snap()).ok


def test_engine_choice():
    remote = list(HOSTS.values())
    local = [Host("x", None, "127.0.0.51", connection="local")]
    assert pick_engine("auto", remote, [NetemSupport("a", True), NetemSupport("b", True)])[0] == "kernel"
    assert pick_engine("auto", remote, [NetemSupport("a", True), NetemSupport("b", False, "no")]) == (
        "userspace", "no netem on b")
    assert pick_engine("auto", local, None)[0] == "userspace"
    with pytest.raises(UserError, match="share"):
        pick_engine("kernel", local, None)
    with pytest.raises(UserError, match="--engine"):
        pick_engine("fast", remote, None)


def test_kernel_plan_carries_jitter_loss_bandwidth_and_a_fifo_against_reordering():
    lmap = latency_map_from_dict(MAP)
    cmds = [shlex.join(c) for c in build_plan(lmap, {n: h.address for n, h in HOSTS.items()},
                                                {n: "eth0" for n in HOSTS})["a"].apply_commands()]
    assert "tc qdisc add dev eth0 parent 1:11 handle 11: netem delay 20ms 2ms loss 1%" in cmds
    assert "tc class add dev eth0 parent 1: classid 1:11 htb rate 50000kbit" in cmds
    assert "tc qdisc add dev eth0 parent 11:1 pfifo limit 1000" in cmds
    free = build_plan(lmap, {n: h.address for n, h in HOSTS.items()}, {n: "eth0" for n in HOSTS}, reorder=True)
    assert not any("parent 11:1" in shlex.join(c) for c in free["a"].apply_commands())


def test_daemon_argv_carries_the_label_as_one_argument():
    argv = daemon_argv("/run/x/links.json", "gesscale-netem:lab:a")
    assert argv[:2] == ["-m", "netem.userspace"] and "gesscale-netem:lab:a" in argv
    with pytest.raises(ValueError):
        daemon_argv("/x", "lab a")


def test_cli_refuses_a_kernel_engine_on_local_hosts_and_a_testbed_tag_before_touching_anything(tmp_path, capsys):
    from gesscale.cli import main

    inv, lmap = tmp_path / "hosts.yml", tmp_path / "map.yaml"
    inv.write_text("all:\n  hosts:\n    a: {ansible_host: 127.0.0.51, ansible_connection: local}\n"
                   "    b: {ansible_host: 127.0.0.52, ansible_connection: local}\n")
    lmap.write_text("nodes: {a: {}, b: {}}\nrtt_ms: {a: {b: 10}}\n")
    for extra, message in [(["--engine", "kernel"], "share loopback"), (["--tag", "tb12"], "local testbed"),
                           (["--engine", "fast"], "--engine must be one of")]:
        assert main(["netem", "apply", "-i", str(inv), "-m", str(lmap), *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert "gesscale-netem:" not in subprocess.run(["iptables", "-t", "mangle", "-S", "OUTPUT"], capture_output=True,
                                                   text=True).stdout.replace("gesscale-netem:tb", "")
