"""Hand-made observations and contexts for the policy tests of this folder.

A flat 8-node cluster (every RTT 10 ms) keeps capacities easy to compute by hand: ND_max is 10 ms for any
two or more replicas, so a model fitted at one ND_max predicts alpha · n^beta.
"""

from __future__ import annotations

import random
from typing import Any

from gesscale.config import ControllerConfig
from gesscale.latency_map import latency_map_from_dict
from gesscale.observation import Observation
from gesscale.policies.base import PolicyContext

NODES = [f"n{i}" for i in range(1, 9)]
FLAT = latency_map_from_dict({
    "nodes": NODES,
    "rtt_ms": {a: {b: 10.0 for b in NODES[i + 1:]} for i, a in enumerate(NODES[:-1])},
})


def nodes(n: int) -> tuple[str, ...]:
    """The first n node names."""
    return tuple(NODES[:n])


def obs(
    n: int = 2,
    *,
    t: float = 600.0,
    input_rate: float = 100.0,
    throughput: float = 100.0,
    backlog: float = 0.0,
    growth: float = 0.0,
    bp: float = 0.0,
    busy: float | None = 0.5,
    cpu: float | None = None,
    paused_s: float = 0.0,
) -> Observation:
    """One 60 s period of n replicas; cpu defaults to busy."""
    reps = nodes(n)
    return Observation(
        time_s=t, period_s=60.0, input_rate=input_rate, throughput=throughput, backlog=backlog,
        backlog_growth=growth, bp_upstream=bp, bp_operator=0.0, replicas=reps, nd_max_ms=FLAT.nd_max(reps),
        cpu=busy if cpu is None else cpu, busy=busy, paused_s=paused_s,
    )


def ctx(since: float = 1e9, input_end_s: float | None = None, **config: Any) -> PolicyContext:
    """A context on the flat cluster; `since` is the time since the last reconfiguration, `input_end_s` when the
    input ends (None: unbounded)."""
    opts: dict[str, Any] = {"max_replicas": 8, **config}
    return PolicyContext(
        graph=FLAT.graph(), candidates=tuple(FLAT.names), config=ControllerConfig(**opts),
        rng=random.Random(1), since_reconfig_s=since, input_end_s=input_end_s,
    )
