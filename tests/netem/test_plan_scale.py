"""Plans for large maps: built one node at a time, filters bucketed in a u32 hash table above HASH_MIN_PEERS."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gesscale.latency_map import latency_map_from_dict
from netem.plan import HASH_MIN_PEERS, build_plan, iter_plans

N = 100
NAMES = [f"n{i}" for i in range(N)]
ADDR = {a: f"10.0.{i // 200}.{i % 200 + 1}" for i, a in enumerate(NAMES)}
DEV = {a: "lo" for a in NAMES}


def _map() -> object:
    return latency_map_from_dict({"nodes": NAMES, "default_rtt_ms": 10, "rtt_ms": {"n0": {"n4": 30}},
                                  "links": {"n0": {"n7": {"jitter_ms": 1, "loss_pct": 2}}}})


def test_a_large_fan_out_is_bucketed_on_the_last_octet_and_a_small_one_is_not() -> None:
    plan = build_plan(_map(), ADDR, DEV, nodes=["n0"])["n0"]
    assert len(plan.rules) == N - 1 > HASH_MIN_PEERS and plan.hashed
    cmds = [" ".join(c) for c in plan.apply_commands()]
    assert cmds[2] == "tc filter add dev lo parent 1: prio 1 handle 2: protocol ip u32 divisor 256"
    assert cmds[3] == ("tc filter add dev lo parent 1: protocol ip prio 1 u32 ht 800:: match ip dst 0.0.0.0/0 "
                       "hashkey mask 0x000000ff at 16 link 2:")
    filters = [c for c in cmds if "flowid" in c]
    assert len(filters) == N - 1
    assert ("tc filter add dev lo parent 1: protocol ip prio 1 u32 ht 2:5: match ip dst 10.0.0.5/32 "
            "flowid 1:13") in filters
    small = latency_map_from_dict({"nodes": NAMES[:10], "default_rtt_ms": 10})
    assert not build_plan(small, ADDR, DEV, nodes=["n0"])["n0"].hashed


def test_plans_from_rows_equal_plans_from_links() -> None:
    lmap = _map()
    plan = build_plan(lmap, ADDR, DEV, nodes=["n0"])["n0"]
    for rule in plan.rules:
        link = lmap.link("n0", rule.peer)
        assert (rule.delay_ms, rule.jitter_ms, rule.loss_pct, rule.bandwidth_mbit) == (
            link.rtt_ms / 2, link.jitter_ms, link.loss_pct, link.bandwidth_mbit)
    assert {r.peer: r.delay_ms for r in plan.rules}["n4"] == 15.0


def test_plans_are_built_one_node_at_a_time() -> None:
    lmap = _map()
    asked: list[int] = []
    row = lmap.row
    lmap.row = lambda i: (asked.append(i), row(i))[1]  # type: ignore[method-assign]
    plans = iter_plans(lmap, ADDR, DEV)
    assert asked == []
    node, _ = next(plans)
    assert node == "n0" and asked == [0]


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("tc") is None, reason="needs unshare and tc")
def test_the_kernel_takes_the_hashed_tree_and_classifies_by_it(tmp_path) -> None:
    script = build_plan(_map(), ADDR, DEV, "structural", nodes=["n0"])["n0"].apply_script()
    (tmp_path / "plan.sh").write_text(script)
    probe = ("ip link set lo up && ip addr add 10.0.0.5/32 dev lo && sh -e plan.sh 2>/dev/null && "
             "ping -c 2 -W 1 10.0.0.5 >/dev/null && tc -s class show dev lo classid 1:13")
    done = subprocess.run(["unshare", "-n", "sh", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.skip("no permission for a network namespace")
    assert done.returncode == 0, done.stderr
    assert "Sent 0 bytes" not in done.stdout and " pkt" in done.stdout  # n4 (10.0.0.5) traffic went to its class
