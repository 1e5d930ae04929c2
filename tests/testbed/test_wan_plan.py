"""The testbed's WAN plan (pure): which connections get which delay, marks, tags, and refused inputs."""

from __future__ import annotations

import itertools

import pytest

from gesscale.errors import UserError
from gesscale.testbed.wan_plan import MARK_MASK, MARK_SHIFT, build_wan_plan, choose_site

SITES = ("fog1", "fog2", "fog3", "fog4")
RTT = {("fog1", "fog2"): 10.0, ("fog1", "fog3"): 20.0, ("fog2", "fog3"): 15.0,
       ("fog1", "fog4"): 30.0, ("fog2", "fog4"): 22.0, ("fog3", "fog4"): 8.0}
RTT |= {(b, a): v for (a, b), v in list(RTT.items())}
HOSTS = {"fog1": "127.0.0.31", "fog2": "127.0.0.32", "fog3": "127.0.0.33"}


def _plan(site: str = "fog4", extras: dict | None = None, tag: str = "tb42"):  # noqa: ANN202
    return build_wan_plan(RTT, extras or {}, HOSTS, site, "gesscale-testbed-42", tag, 7)


def test_every_ordered_pair_of_sites_is_one_link_with_the_full_rtt() -> None:
    plan = _plan()
    pairs = {(link.src, link.dst): link.delay_ms for link in plan.links.values()}
    expected = {(a, b): RTT[(a, b)] for a, b in itertools.permutations(HOSTS, 2)}
    expected |= {(a, "fog4"): RTT[(a, "fog4")] for a in HOSTS} | {("fog4", b): RTT[("fog4", b)] for b in HOSTS}
    assert pairs == expected


def test_each_link_is_marked_within_the_mask_then_queued() -> None:
    plan = _plan()
    marks = [r for r in plan.rules if "MARK" in r]
    queues = [r for r in plan.rules if "NFQUEUE" in r]
    assert len(marks) == len(queues) == len(plan.links)
    for mark_rule, queue_rule in zip(marks, queues, strict=True):
        value, mask = mark_rule[mark_rule.index("--set-xmark") + 1].split("/")
        assert int(mask, 16) == MARK_MASK and int(value, 16) & ~MARK_MASK == 0
        assert int(value, 16) >> MARK_SHIFT in plan.links
        assert queue_rule[queue_rule.index("--queue-num") + 1] == "7"
        # the queue rule matches exactly what its mark rule matched
        assert mark_rule[: mark_rule.index("-j")] == queue_rule[: queue_rule.index("-j")]


def test_fog_nodes_are_told_apart_by_their_cgroup_and_the_site_comes_last() -> None:
    rules = _plan().rules
    first_site_rule = next(i for i, r in enumerate(rules) if "cgroup" not in r)
    assert all("cgroup" not in r for r in rules[first_site_rule:])
    fog2 = [r for r in rules if "gesscale-testbed-42/fog2" in r]
    assert fog2 and all(r[r.index("--path") + 1] == "gesscale-testbed-42/fog2" for r in fog2)
    # a fog node's catch-all (to the site) comes after its rules to the other fog nodes
    dests = [r[r.index("-d") + 1] if "-d" in r else None for r in fog2 if "MARK" in r]
    assert dests == ["127.0.0.31/32", "127.0.0.33/32", None]


def test_a_site_that_is_a_fog_node_gives_its_own_connections_no_delay() -> None:
    plan = _plan(site="fog2")
    assert all(link.src != link.dst for link in plan.links.values())
    assert ("fog2", "fog2") not in {(link.src, link.dst) for link in plan.links.values()}
    returns = [r for r in plan.rules if r[-1] == "RETURN"]
    assert len(returns) == 2  # fog2 to the site and the site to fog2


def test_jitter_and_loss_ride_along_and_a_zero_link_with_loss_is_still_queued() -> None:
    plan = _plan(site="fog2", extras={("fog2", "fog2"): (0.0, 5.0), ("fog1", "fog3"): (2.0, 0.5)})
    by_pair = {(x.src, x.dst): x for x in plan.links.values()}
    assert by_pair[("fog1", "fog3")].jitter_ms == 2.0 and by_pair[("fog1", "fog3")].loss_pct == 0.5
    assert by_pair[("fog2", "fog2")].delay_ms == 0.0 and by_pair[("fog2", "fog2")].loss_pct == 5.0


def test_every_rule_and_the_jump_carry_the_tag_and_clear_undoes_apply() -> None:
    plan = _plan(tag="tb9")
    cmds = plan.apply_commands()
    assert cmds[0] == ["-N", "GS-tb9"] and cmds[-1][:2] == ["-A", "OUTPUT"]
    assert all("gesscale-netem:tb9" in c for c in cmds[1:])
    assert "ORIGINAL" in cmds[-1]
    clear = plan.clear_commands()
    assert clear[0] == ["-D", *cmds[-1][1:]] and clear[-1] == ["-X", "GS-tb9"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tag": "a b"}, "netem tag"), ({"tag": "x;rm -rf /"}, "netem tag"), ({"tag": "a" * 21}, "netem tag"),
    ({"queue": 70000}, "NFQUEUE"), ({"hosts": {"fog1": "127.0.0.1; reboot"}}, "not an IPv4"),
    ({"hosts": {"fog 1": "127.0.0.31"}}, "node name"), ({"parent": "a b"}, "cgroup path"),
])
def test_values_that_reach_iptables_are_checked(kwargs: dict, message: str) -> None:
    args = {"tag": "tb1", "queue": 1, "hosts": HOSTS, "parent": "gesscale-testbed-1"} | kwargs
    with pytest.raises(UserError, match=message):
        build_wan_plan(RTT, {}, args["hosts"], "fog4", args["parent"], args["tag"], args["queue"])


def test_the_default_site_minimises_the_worst_rtt_to_the_nodes() -> None:
    rtt = dict(RTT) | {(a, a): 0.0 for a in SITES}
    assert choose_site(rtt, list(HOSTS), SITES) == "fog2"  # worst 15 ms; fog1 20, fog3 20, fog4 30
    assert choose_site(rtt, ["fog3", "fog4"], SITES) == "fog3"  # 8 ms to fog4; ties go to the earlier
