"""The fog events schema fuzzed by property (issue 32): any list of entries, valid or not, is taken with every
number inside its declared range and a schedule that answers at any time, or refused with one `UserError` line;
never another exception, a hang or a runaway allocation. A map taken gives the userspace engine valid link tables
whose outages hold down the pairs the schedule holds down, at the same times, edges included. A small example
budget (150 each, `BUDGET` in conftest.py): the schema is small."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies as s
from tests.fuzz.test_fuzz_inputs import _within, outcome


@given(s.fog_events())
def test_fuzz_fog_events(entries: list[Any]) -> None:
    from gesscale.events import MAX_CHURN_RATE_PER_H, MAX_EVENT_S, MAX_FLAP_PERIOD_S, MAX_SEED
    from gesscale.latency_map import latency_map_from_dict

    kind, lmap = outcome(lambda: latency_map_from_dict({**s.MAP, "changes": entries}, "map.yaml"))
    if kind != "ok":
        return
    for e in lmap.events:
        assert _within(e.t_s, 0, MAX_EVENT_S)
        assert e.duration_s is None or (_within(e.duration_s, 0, MAX_EVENT_S) and e.duration_s > 0)
        if e.kind == "flap":
            assert e.period_s is not None and e.down_s is not None
            assert _within(e.period_s, 0, MAX_FLAP_PERIOD_S) and 0 < e.down_s < e.period_s
        if e.kind == "churn":
            assert _within(e.rate_per_h or 0, 0, MAX_CHURN_RATE_PER_H) and _within(e.seed or 0, 0, MAX_SEED)
        assert set(e.nodes) <= set(lmap.names) and all(set(p) <= set(lmap.names) for p in e.pairs)
    sched = lmap.schedule()
    times = [0.0, 59.0, 60.0, 61.0, 3600.0, 1e6]
    for e in lmap.events:
        if e.kind in ("partition", "flap"):
            end = e.t_s + (e.duration_s or 0.0)
            times += [e.t_s, end - 1e-6, end, e.t_s + (e.down_s or 0.0), e.t_s + (e.period_s or 0.0)]
    down = {t: sched.down_pairs(t) for t in times}
    for t in times:
        sched.states(t)
        assert all(len(p) == 2 for p in down[t])
        nxt = sched.next_change(t)
        assert nxt > t or math.isinf(nxt)
    _check_link_tables(lmap, down)


def _check_link_tables(lmap: Any, down: dict[float, set[frozenset[str]]]) -> None:
    """The userspace engine's tables (through the daemon's own validation) cut what the schedule cuts."""
    from netem.engines import userspace_plans
    from netem.hosts import Host
    from netem.userspace.table import table_from_dict

    hosts = {n: Host(n, None, f"127.0.0.{51 + i}", connection="local") for i, n in enumerate(lmap.names)}
    for node, plan in userspace_plans(lmap, hosts, "fuzz", t0_unix=1.8e9).items():
        for link in table_from_dict(json.loads(json.dumps(plan.table()))).links.values():
            for t, pairs in down.items():
                cut = link.outages is not None and link.outages.down_at(t)
                assert cut == (frozenset((node, link.dst)) in pairs), (t, node, link.dst)


_PAIRS = [["a", "b"], ["a", "c"], ["b", "c"]]
_times = st.floats(0, 1000, allow_nan=False)
_durations = st.none() | st.floats(0.001, 500, allow_nan=False)


@st.composite
def _link_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1 to 4 valid partitions (pairs or groups) and flaps on MAP's nodes, at drawn times and durations."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        e: dict[str, Any] = {"t_s": draw(_times)}
        if draw(st.booleans()):
            e["event"] = "partition"
            if draw(st.booleans()):
                e["pairs"] = draw(st.lists(st.sampled_from(_PAIRS), min_size=1, max_size=3))
            else:
                e["groups"] = draw(st.sampled_from([[["a"], ["b", "c"]], [["a", "b"], ["c"]], [["b"], ["a"]]]))
        else:
            period = draw(st.floats(0.01, 100, allow_nan=False))
            e.update(event="flap", pair=draw(st.sampled_from(_PAIRS)), period_s=period,
                     down_s=period * draw(st.floats(0.01, 0.99)))
        duration = draw(_durations)
        if duration is not None:
            e["duration_s"] = duration
        out.append(e)
    return sorted(out, key=lambda e: e["t_s"])


@given(_link_events(), st.lists(st.floats(0, 3000, allow_nan=False), max_size=20))
def test_fuzz_link_outages(entries: list[dict[str, Any]], extra: list[float]) -> None:
    """Valid partitions and flaps at any times: the userspace engine's link tables, as the agent writes them
    (JSON) and the daemon reads them, hold a pair down exactly when the event schedule does, at drawn times and at
    every window and phase edge (the same float arithmetic as `EventSchedule.down_pairs`)."""
    from gesscale.latency_map import latency_map_from_dict

    lmap = latency_map_from_dict({**s.MAP, "changes": entries}, "map.yaml")
    times = list(extra)
    for e in lmap.events:
        end = e.t_s + (e.duration_s or 0.0)
        times += [e.t_s, math.nextafter(e.t_s, -1.0), end, math.nextafter(end, -1.0)]
        if e.kind == "flap":
            assert e.period_s is not None and e.down_s is not None
            for k in range(3):
                edge = e.t_s + k * e.period_s
                times += [edge + e.down_s, math.nextafter(edge + e.down_s, -1.0), edge + e.period_s]
    sched = lmap.schedule()
    _check_link_tables(lmap, {t: sched.down_pairs(t) for t in times if t >= 0})
