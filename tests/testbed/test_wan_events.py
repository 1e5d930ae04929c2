"""A live run's fog events on the testbed's WAN emulation (pure, no daemon): the table updates an events file calls
for (times, contents), the outages of the partitions and flaps (links, windows, `t0_unix`), the pairs queued for
events although at 0 ms, no warning for a run that applies every kind, and what `TestbedWan` writes and records
(its daemon and signals replaced: nothing is started)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from gesscale.testbed import wan as wan_module
from gesscale.testbed.controller import fog_events
from gesscale.testbed.wan import TestbedWan, link_tables
from gesscale.testbed.wan_events import (
    link_outages,
    pairs_to_queue,
    table_document,
    table_updates,
)
from gesscale.testbed.wan_plan import MARK_MASK, MARK_SHIFT, build_wan_plan
from netem.userspace.table import table_from_dict

HOSTS = {"fog1": "127.0.0.31", "fog2": "127.0.0.32", "fog3": "127.0.0.33"}
SITES = ["fog1", "fog2", "fog3", "site"]
MAP = {"nodes": SITES, "default_rtt_ms": 10.0, "rtt_ms": {"fog1": {"site": 5.0}}}
EVENTS = [
    {"t_s": 30, "node": "fog1", "add_rtt_ms": 60},  # fog1's links degrade (all of them)
    {"t_s": 30, "pair": ["fog2", "fog3"], "jitter_ms": 2, "loss_pct": 1},
    {"t_s": "2m", "event": "partition", "pairs": [["fog2", "site"]], "duration_s": 20},
    {"t_s": 150, "event": "flap", "pair": ["fog1", "fog3"], "period_s": 10, "down_s": 2, "duration_s": 60},
    {"t_s": 200, "node": "fog1", "add_rtt_ms": -60},  # back
    {"t_s": 300, "event": "crash", "node": "fog3", "duration_s": 60},
]


def _fog() -> Any:
    return latency_map_from_dict(MAP, "m.yaml").with_events(EVENTS, "ev.yaml")


def _plan(lmap: Any) -> Any:
    rtt, extras = link_tables(lmap, SITES)
    return build_wan_plan(rtt, extras, HOSTS, "site", "gesscale-testbed-1", "tb1", 3100,
                          queued=pairs_to_queue(lmap, SITES))


def _by_pair(links: dict[int, Any]) -> dict[tuple[str, str], Any]:
    return {(v.src, v.dst): v for v in links.values()}


def test_the_link_changes_are_table_updates_at_their_times_with_the_new_values() -> None:
    lmap = _fog()
    plan = _plan(lmap)
    updates = table_updates(lmap, plan.links)
    assert [u.t_s for u in updates] == [30.0, 200.0]  # the partition, the flap and the crash change no value
    at30 = _by_pair(updates[0].links)
    assert at30[("fog1", "fog2")].delay_ms == at30[("fog2", "fog1")].delay_ms == 70.0
    assert at30[("fog1", "site")].delay_ms == at30[("site", "fog1")].delay_ms == 65.0
    assert at30[("fog2", "site")].delay_ms == 10.0  # untouched links keep their value
    assert (at30[("fog2", "fog3")].jitter_ms, at30[("fog2", "fog3")].loss_pct) == (2.0, 1.0)
    changed = {(new.src, new.dst) for _, new in updates[0].changed}
    assert changed == {("fog1", "fog2"), ("fog2", "fog1"), ("fog1", "fog3"), ("fog3", "fog1"), ("fog1", "site"),
                       ("site", "fog1"), ("fog2", "fog3"), ("fog3", "fog2")}
    assert all(old.delay_ms + 60 == new.delay_ms for old, new in updates[0].changed if "fog1" in (new.src, new.dst))
    back = _by_pair(updates[1].links)
    assert back[("fog1", "site")].delay_ms == 5.0 and back[("fog1", "fog2")].delay_ms == 10.0
    assert back[("fog2", "fog3")].jitter_ms == 2.0  # the jitter change stays
    record = updates[1].to_dict()
    assert record["t_s"] == 200.0 and {"src": "fog1", "dst": "site", "rtt_ms": [65.0, 5.0], "jitter_ms": [0.0, 0.0],
                                       "loss_pct": [0.0, 0.0]} in record["links"]


def test_the_partitions_and_flaps_are_the_cut_pairs_outages_in_both_directions() -> None:
    lmap = _fog()
    plan = _plan(lmap)
    cut = {(plan.links[i].src, plan.links[i].dst): o for i, o in link_outages(lmap.events, plan.links).items()}
    assert set(cut) == {("fog2", "site"), ("site", "fog2"), ("fog1", "fog3"), ("fog3", "fog1")}
    assert cut[("fog2", "site")].windows == ((120.0, 140.0),) == cut[("site", "fog2")].windows
    flap = cut[("fog1", "fog3")].flaps[0]
    assert (flap.from_s, flap.period_s, flap.down_s, flap.until_s) == (150.0, 10.0, 2.0, 210.0)
    assert cut[("fog1", "fog3")].down_at(150.5) and not cut[("fog1", "fog3")].down_at(153)
    assert not link_outages(latency_map_from_dict(MAP, "m").events, plan.links)  # no events: nothing cut


def test_the_table_gets_the_outages_and_t0_only_once_the_runs_clock_starts() -> None:
    lmap = _fog()
    plan = _plan(lmap)
    outages = link_outages(lmap.events, plan.links)
    before = table_document(plan.queue, MARK_MASK, MARK_SHIFT, plan.links, None, outages)
    assert "t0_unix" not in before and not any("down" in v or "flaps" in v for v in before["links"].values())
    doc = table_document(plan.queue, MARK_MASK, MARK_SHIFT, plan.links, 1_800_000_000.0, outages)
    table = table_from_dict(json.loads(json.dumps(doc)))  # what the daemon reads, validated as it validates
    assert table.t0_unix == 1_800_000_000.0 and table.mark_mask == MARK_MASK
    down = {(s.src, s.dst) for s in table.links.values() if s.outages is not None}
    assert down == {("fog2", "site"), ("site", "fog2"), ("fog1", "fog3"), ("fog3", "fog1")}
    fog2_site = next(s for s in table.links.values() if (s.src, s.dst) == ("fog2", "site"))
    assert fog2_site.outages is not None and fog2_site.outages.down_at(125) and not fog2_site.outages.down_at(140)


def test_a_pair_at_0_ms_that_an_event_delays_or_cuts_is_queued() -> None:
    flat = {"nodes": SITES, "default_rtt_ms": 0.0}
    base = latency_map_from_dict(flat, "flat")
    assert pairs_to_queue(base, SITES) == set()
    assert not _plan(base).links  # nothing to delay: every rule is a RETURN
    fog = base.with_events([{"t_s": 10, "pair": ["fog1", "fog2"], "rtt_ms": 40},
                            {"t_s": 20, "event": "partition", "pairs": [["fog3", "site"]]}], "ev")
    assert pairs_to_queue(fog, SITES) == {("fog1", "fog2"), ("fog2", "fog1"), ("fog3", "site"), ("site", "fog3")}
    plan = _plan(fog)
    assert set(_by_pair(plan.links)) == {("fog1", "fog2"), ("fog2", "fog1"), ("fog3", "site"), ("site", "fog3")}
    assert _by_pair(table_updates(fog, plan.links)[0].links)[("fog1", "fog2")].delay_ms == 40.0
    outages = link_outages(fog.events, plan.links)
    assert {(plan.links[i].src, plan.links[i].dst) for i in outages} == {("fog3", "site"), ("site", "fog3")}
    assert all(math.isinf(o.windows[0][1]) for o in outages.values())  # never heals


def test_fog_events_keeps_the_controllers_map_and_refuses_what_cannot_apply_them(tmp_path: Path) -> None:
    lmap = latency_map_from_dict(MAP, "m.yaml")
    events = tmp_path / "ev.yaml"
    events.write_text(json.dumps(EVENTS))
    fog, note = fog_events(lmap, events, owned=True, wan=True, command="demo")
    assert fog.documented is lmap and fog.at(40).rtt("fog1", "fog2") == 70.0 and lmap.at(40).rtt("fog1", "fog2") == 10
    assert note is None  # its crash is applied too: to the fog nodes (tests/testbed/test_node_events.py)
    with pytest.raises(UserError, match="cannot be given with --testbed"):
        fog_events(lmap, events, owned=False, wan=True, command="run")
    with pytest.raises(UserError, match=r"needs the WAN emulation \(--wan\)"):
        fog_events(lmap, events, owned=True, wan=False, command="run")
    events.write_text(json.dumps([{"t_s": 5, "event": "crash", "node": "zz"}]))
    with pytest.raises(UserError, match="'node' names unknown node 'zz'"):
        fog_events(lmap, events, owned=True, wan=True, command="run")
    assert fog_events(lmap, None, owned=True, wan=True, command="run") == (lmap, None)


class _Signals:
    """Stands for the daemon: records the SIGHUPs `TestbedWan` sends (no process is started or signalled)."""

    def __init__(self) -> None:
        self.hups = 0

    def pids(self, tag: str) -> list[int]:
        return [4242]

    def kill(self, pid: int, sig: int) -> None:
        assert pid == 4242
        self.hups += 1


def test_the_wan_writes_the_outages_at_t0_and_records_each_update_with_its_signal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lmap = _fog()
    plan = _plan(lmap)
    signals = _Signals()
    monkeypatch.setattr(wan_module, "daemon_pids", signals.pids)
    monkeypatch.setattr(wan_module.os, "kill", signals.kill)
    w = TestbedWan(plan, None, "site", tmp_path, latency_map=lmap,  # type: ignore[arg-type]
                   outages=link_outages(lmap.events, plan.links))
    w._write_config()
    assert "t0_unix" not in json.loads(w.config_path.read_text())
    w.t0_unix = 1_800_000_000.0
    w._write_config()
    w._reload()
    table = table_from_dict(json.loads(w.config_path.read_text()))
    assert table.t0_unix == 1_800_000_000.0 and sum(s.outages is not None for s in table.links.values()) == 4
    assert w.follow(30.0) and not w.follow(31.0)  # only a change of values is an update
    assert w.follow(200.0)
    assert signals.hups == 3
    assert [e["t_s"] for e in w.changes_applied] == [30.0, 200.0]
    # each with the time of its signal, and how late that was against the run's clock
    assert all(e["late_s"] == round(e["at"] - (1_800_000_000.0 + e["t_s"]), 3) for e in w.changes_applied)
    table = table_from_dict(json.loads(w.config_path.read_text()))
    assert next(s for s in table.links.values() if (s.src, s.dst) == ("fog1", "site")).delay_ms == 5.0
    assert sum(s.outages is not None for s in table.links.values()) == 4  # the outages stay in every update
    lines = [json.loads(x) for x in (tmp_path / "wan-events.jsonl").read_text().splitlines()]
    assert [(x["kind"], x["t_s"]) for x in lines] == [("link", 30.0), ("link", 200.0)]
