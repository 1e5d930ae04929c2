"""The fog events schema (gesscale/events.py): parsing in a map's `changes:`, `--events` entries, one-line errors,
and the state of the fog at a second (node states, links down, churn drawn from its seed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gesscale.errors import UserError
from gesscale.events import DOWN, GONE, LEAVING, UP, EventSchedule, churn_crashes, serving_set
from gesscale.latency_map import latency_map_from_dict, read_events

ROOT = Path(__file__).resolve().parents[1]
BASE = {"nodes": ["a", "b", "c", "d"], "default_rtt_ms": 10}


def lmap(*changes: dict) -> object:
    return latency_map_from_dict({**BASE, "changes": list(changes)}, "m.yaml")


def test_every_kind_parses_beside_a_link_change_and_round_trips() -> None:
    m = lmap(
        {"t_s": 5, "node": "a", "add_rtt_ms": 20},
        {"t_s": 10, "event": "partition", "groups": [["a", "b"], ["c"]], "duration_s": "5m"},
        {"t_s": 20, "event": "flap", "pair": ["a", "d"], "period_s": 60, "down_s": 10},
        {"t_s": 30, "event": "crash", "node": "b", "duration_s": 100},
        {"t_s": 40, "event": "leave", "node": "c"},
        {"t_s": 50, "event": "join", "node": "d"},
        {"t_s": 60, "event": "churn", "rate_per_h": 6, "duration_s": 3600, "down_s": 60, "seed": 3},
        {"t_s": 70, "event": "link", "pair": ["a", "b"], "loss_pct": 1},
    )
    assert [c.t_s for c in m.changes] == [5, 70]  # link changes stay link changes
    kinds = [e.kind for e in m.events]
    assert kinds == ["partition", "flap", "crash", "leave", "join", "churn"]
    part = m.events[0]
    assert part.duration_s == 300 and set(part.pairs) == {("a", "c"), ("b", "c")}
    assert m.events[3].drain_s == 60  # the default drain
    again = latency_map_from_dict(m.to_dict(), "again")
    assert again.events == m.events and again.changes == m.changes
    assert m.at(100).events == m.events  # every map of the schedule carries them


def test_events_merge_by_time_with_the_maps_changes() -> None:
    m = lmap({"t_s": 100, "node": "a", "add_rtt_ms": 5})
    merged = m.with_events([{"t_s": 50, "pair": ["b", "c"], "rtt_ms": 40},
                            {"t_s": 60, "event": "crash", "node": "d"}], "ev.yaml")
    assert [c.t_s for c in merged.changes] == [50, 100]
    assert merged.at(55).rtt("b", "c") == 40 and merged.at(0).rtt("b", "c") == 10
    assert [e.kind for e in merged.events] == ["crash"]
    assert m.events == ()  # the map given is not changed


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"t_s": 1, "event": "explode", "node": "a"}, r"changes\[0\]: 'event' must be one of link, partition"),
        ({"t_s": 1, "event": "crash"}, r"changes\[0\] \(crash at t_s 1\): missing 'node'"),
        ({"t_s": 1, "event": "crash", "node": "q"}, r"'node' names unknown node 'q'"),
        ({"t_s": 1, "event": "crash", "node": "a", "duraton_s": 3}, r"unknown key 'duraton_s'"),
        ({"t_s": 1, "event": "crash", "node": "a", "duration_s": 0}, r"'duration_s' must be in \(0, .*\], got 0"),
        ({"t_s": 1, "event": "crash", "node": "a", "duration_s": "forever"}, r"'duration_s'.* not a duration"),
        ({"t_s": -1, "event": "crash", "node": "a"}, r"changes\[0\]: 't_s' must be in \[0, "),
        ({"event": "join", "node": "a"}, r"missing 't_s'"),
        ({"t_s": 1, "event": "partition", "duration_s": 5}, r"give either 'pairs' .* or 'groups'"),
        ({"t_s": 1, "event": "partition", "pairs": [["a", "a"]]}, r"'pairs' \(a, a\): a node has no link to itself"),
        ({"t_s": 1, "event": "partition", "groups": [["a", "b"], ["b"]]}, r"node 'b' is in both groups"),
        ({"t_s": 1, "event": "partition", "groups": [["a"]]}, r"'groups' must be two lists of nodes"),
        ({"t_s": 1, "event": "flap", "pair": ["a", "b"], "period_s": 10, "down_s": 10},
         r"'down_s' must be in \(0, 10\), got 10"),
        ({"t_s": 1, "event": "flap", "pair": ["a", "b"], "down_s": 1}, r"missing 'period_s'"),
        ({"t_s": 1, "event": "flap", "pair": ["a", "b"], "period_s": 1e9, "down_s": 1}, r"'period_s' must be in"),
        ({"t_s": 1, "event": "leave", "node": "a", "drain_s": -3}, r"'drain_s' must be in \[0, "),
        ({"t_s": 1, "event": "churn", "rate_per_h": 5, "duration_s": 60}, r"missing 'down_s'"),
        ({"t_s": 1, "event": "churn", "rate_per_h": 0, "duration_s": 60, "down_s": 5}, r"'rate_per_h' must be in"),
        ({"t_s": 1, "event": "churn", "rate_per_h": 3600, "duration_s": 3e7, "down_s": 5}, r"at most 10000 are taken"),
        ({"t_s": 1, "event": "churn", "rate_per_h": 1, "duration_s": 60, "down_s": 5, "seed": 1.5},
         r"'seed' must be a whole number"),
        ({"t_s": 1, "event": "churn", "rate_per_h": 1, "duration_s": 60, "down_s": 5, "nodes": ["a", "a"]},
         r"'nodes' lists a node twice"),
    ],
)
def test_each_bad_event_is_one_line_naming_the_entry_and_key(entry: dict, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        lmap(entry)
    assert "\n" not in str(info.value) and str(info.value).startswith("m.yaml: changes[0]")


def test_events_out_of_time_order_are_refused() -> None:
    with pytest.raises(UserError, match=r"changes\[1\]: out of time order \(changes\[0\] is at t_s 9\)"):
        lmap({"t_s": 9, "node": "a", "rtt_ms": 3}, {"t_s": 5, "event": "crash", "node": "a"})


def test_an_events_file_is_a_list_or_a_mapping_with_events(tmp_path: Path) -> None:
    good = tmp_path / "ev.yaml"
    good.write_text(yaml.safe_dump({"events": [{"t_s": 1, "event": "crash", "node": "a"}]}))
    assert read_events(good) == [{"t_s": 1, "event": "crash", "node": "a"}]
    bad = tmp_path / "bad.yaml"
    bad.write_text("evnts: []\n")
    with pytest.raises(UserError, match=re.escape("unknown key 'evnts'")):
        read_events(bad)
    bad.write_text("42\n")
    with pytest.raises(UserError, match="must be a list of entries"):
        read_events(bad)


def test_node_states_follow_crash_leave_and_join() -> None:
    m = lmap({"t_s": 10, "event": "crash", "node": "a", "duration_s": 20},
             {"t_s": 10, "event": "leave", "node": "b", "drain_s": 5},
             {"t_s": 40, "event": "join", "node": "b"},
             {"t_s": 50, "event": "join", "node": "c"})
    s = m.schedule()
    assert [s.node_state("a", t) for t in (9, 10, 29, 30)] == [UP, DOWN, DOWN, UP]
    assert [s.node_state("b", t) for t in (9, 10, 15, 40)] == [UP, LEAVING, GONE, UP]
    assert [s.node_state("c", t) for t in (0, 49, 50)] == [GONE, GONE, UP]  # first event a join: absent before
    assert s.states(12) == {"a": DOWN, "b": LEAVING, "c": GONE}
    assert s.next_change(10) == 15 and s.next_change(30) == 40 and s.next_change(50) == float("inf")


def test_partitions_and_flaps_take_links_down_while_they_hold() -> None:
    m = lmap({"t_s": 10, "event": "partition", "pairs": [["a", "b"]], "duration_s": 30},
             {"t_s": 100, "event": "flap", "pair": ["c", "d"], "period_s": 20, "down_s": 5, "duration_s": 60})
    s = m.schedule()
    ab, cd = frozenset("ab"), frozenset("cd")
    assert s.down_pairs(9) == set() and s.down_pairs(10) == {ab} and s.down_pairs(40) == set()
    assert [cd in s.down_pairs(t) for t in (100, 104, 105, 119, 120, 125, 159, 160)] == \
        [True, True, False, False, True, False, False, False]
    assert s.next_change(100) == 105 and s.next_change(105) == 120 and s.next_change(155) == 160


def test_churn_draws_the_same_crashes_from_the_same_seed_and_others_from_another() -> None:
    entry = {"t_s": 0, "event": "churn", "rate_per_h": 30, "duration_s": 3600, "down_s": 60, "seed": 7}
    one = churn_crashes(lmap(entry).events[0])
    assert one == churn_crashes(lmap(entry).events[0]) and 10 <= len(one) <= 60
    assert all(0 < c.t_s < 3600 and c.duration_s == 60 and c.nodes[0] in "abcd" for c in one)
    other = churn_crashes(lmap({**entry, "seed": 8}).events[0])
    assert [c.t_s for c in other] != [c.t_s for c in one]
    assert lmap(entry).to_dict()["changes"][0]["seed"] == 7  # the seed is recorded
    sched = EventSchedule(lmap(entry).events, "abcd")
    assert any(sched.node_state(c.nodes[0], c.t_s) == DOWN for c in one)


def test_serving_set_keeps_replicas_that_reach_each_other() -> None:
    assert serving_set(("a", "b", "c"), set()) == (("a", "b", "c"), ())
    assert serving_set(("a", "b", "c"), {frozenset("ac"), frozenset("bc")}) == (("a", "b"), ("c",))
    assert serving_set(("c", "a"), {frozenset("ac")}) == (("c",), ("a",))  # equals: placement order


def test_the_shipped_events_example_loads_against_its_map() -> None:
    from gesscale.latency_map import load_latency_map

    m = load_latency_map(ROOT / "inventory/latency/pi10.yaml")
    merged = m.with_events(read_events(ROOT / "inventory/latency/pi10-events.yaml"), "example")
    assert {e.kind for e in merged.events} == {"partition", "flap", "crash", "leave", "join", "churn"}
    assert merged.changes  # and a link degradation


def test_a_command_that_does_not_apply_events_says_so() -> None:
    assert lmap().unapplied_events("run") is None
    note = lmap({"t_s": 1, "event": "crash", "node": "a"}).unapplied_events("run")
    assert note == ("m.yaml: 1 fog event(s) (crash) in changes: are not applied by `gesscale run` (the simulator "
                    "only, for now: docs/events.md)")
