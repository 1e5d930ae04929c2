"""The netem verbs for either engine, as the CLI runs them: resolve the engine, then apply, clear, check, measure.

Kept apart from `gesscale/cli/cmd_netem.py` so the CLI only parses options and prints; tests drive these
functions directly with the same hosts and remote.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from gesscale.latency_map import LatencyMap
from netem.engines import DEFAULT_TAG, pick_engine, userspace_plans
from netem.hosts import Host
from netem.pairs import ping_pairs
from netem.remote import Remote
from netem.service import NetemService
from netem.userspace.deploy import UserspaceService, run_agent
from netem.userspace.rules import check_tag, label_of
from netem.validate import Validation, validate


@dataclass(frozen=True)
class Options:
    """How to emulate: engine, tag, reordering, fail-open queues, the hosts' Python, the schedule time."""

    engine: str = "auto"
    tag: str = DEFAULT_TAG
    reorder: bool = False
    queue_bypass: bool = False
    python: str | None = None
    at_s: float | None = None


def resolve(hosts: Mapping[str, Host], lmap: LatencyMap, remote: Remote, opts: Options) -> tuple[str, str]:
    """(engine, why): `auto` probes each distinct machine for netem, in a throwaway namespace."""
    probes = None
    if opts.engine == "auto" and not any(h.local for h in hosts.values()):
        probes = NetemService(dict(hosts), lmap, remote).probe()
    return pick_engine(opts.engine, list(hosts.values()), probes)


def userspace_service(hosts: Mapping[str, Host], lmap: LatencyMap, remote: Remote, opts: Options,
                      devices: Mapping[str, str] | None = None) -> UserspaceService:  # fmt: skip
    """The userspace service for the map in force at `opts.at_s` (the map as written when None).

    The map's partitions and flaps follow the clock from now on: now is the map's time `opts.at_s` (0 when None),
    so `t0_unix` = now - at_s. Its link changes do not (they take `apply --at T` again)."""
    check_tag(opts.tag)
    in_force = lmap if opts.at_s is None else lmap.at(opts.at_s)
    t0_unix = time.time() - (opts.at_s or 0.0)
    plans = userspace_plans(in_force, hosts, opts.tag, opts.reorder, opts.queue_bypass, t0_unix)
    return UserspaceService(hosts, plans, remote, devices).with_python(opts.python)


def needs_devices(lmap: LatencyMap) -> bool:
    """Whether the userspace engine needs interfaces (only for bandwidth limits)."""
    return any(lmap.link(a, b).bandwidth_mbit for a in lmap.names for b in lmap.names if a != b)


def clear_userspace_tag(hosts: Mapping[str, Host], remote: Remote, opts: Options) -> int:
    """Remove every rule and daemon of `opts.tag` on the hosts (each machine once), nothing else; rules removed."""
    check_tag(opts.tag)
    seen: set[str] = set()
    removed = 0
    for host in hosts.values():
        where = "local" if host.local else f"{host.ssh_host}:{host.port}"
        if where in seen:
            continue
        seen.add(where)
        if opts.python and not host.local:
            host = replace(host, python=opts.python)
        removed += int(run_agent(remote, host, "clear", {"label": label_of(opts.tag, "")})["rules_removed"])
    return removed


def down_pairs(lmap: LatencyMap, engine: str, at_s: float | None) -> set[frozenset[str]]:
    """The pairs the emulation holds down at map time `at_s` (0 when None): the map's partitions and flaps in
    force then, for the userspace engine (the kernel engine applies none)."""
    if engine != "userspace":
        return set()
    return lmap.schedule().down_pairs(at_s or 0.0)


def measure(hosts: Mapping[str, Host], lmap: LatencyMap, remote: Remote, engine: str, count: int,
            tolerance_ms: float, tolerance_pct: float, interval_s: float = 0.2,
            at_s: float | None = None) -> Validation:  # fmt: skip
    """Ping all pairs and judge them against the map in force at `at_s`: a pair down then (a partition, a flap's
    down phase) passes when no echo comes back."""
    return validate(lmap, ping_pairs(hosts, lmap.names, remote, count, interval_s), engine, tolerance_ms,
                    tolerance_pct, down_pairs(lmap, engine, at_s))  # fmt: skip
