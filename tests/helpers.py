"""Hand-made observations and contexts for policy tests."""

from __future__ import annotations

import random

from gesscale.config import ControllerConfig
from gesscale.latency_map import latency_map_from_dict
from gesscale.observation import Observation
from gesscale.policies.base import PolicyContext

LMAP = latency_map_from_dict({
    "nodes": ["n1", "n2", "n3", "n4", "n5", "n6"],
    "rtt_ms": {
        "n1": {"n2": 2, "n3": 4, "n4": 10, "n5": 60, "n6": 120},
        "n2": {"n3": 3, "n4": 12, "n5": 55, "n6": 110},
        "n3": {"n4": 8, "n5": 50, "n6": 100},
        "n4": {"n5": 40, "n6": 90},
        "n5": {"n6": 70},
    },
})


def obs(replicas: tuple[str, ...] = ("n1", "n2"), *, input_rate: float = 100.0, throughput: float = 100.0,
        bp_up: float = 0.0, bp_op: float = 0.0, cpu: float | None = 0.7, growth: float = 0.0,
        backlog: float = 0.0) -> Observation:
    return Observation(
        time_s=600.0, period_s=60.0, input_rate=input_rate, throughput=throughput, backlog=backlog,
        backlog_growth=growth, bp_upstream=bp_up, bp_operator=bp_op, replicas=replicas,
        nd_max_ms=LMAP.nd_max(replicas), cpu=cpu, busy=cpu,
    )


def ctx(since: float = 1e9, **config: object) -> PolicyContext:
    return PolicyContext(
        graph=LMAP.graph(), candidates=tuple(LMAP.names), config=ControllerConfig(**config),  # type: ignore[arg-type]
        rng=random.Random(1), since_reconfig_s=since,
    )
