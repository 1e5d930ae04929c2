"""The fog events schema fuzzed by property (issue 32): any list of entries, valid or not, is taken with every
number inside its declared range and a schedule that answers at any time, or refused with one `UserError` line;
never another exception, a hang or a runaway allocation. A small example budget (150, `BUDGET` in conftest.py):
the schema is small."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given

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
    for t in (0.0, 59.0, 60.0, 61.0, 3600.0, 1e6):
        sched.states(t)
        assert all(len(p) == 2 for p in sched.down_pairs(t))
        nxt = sched.next_change(t)
        assert nxt > t or math.isinf(nxt)
