"""What the testbed's network really does: ping every emulated link from inside its source's group, and judge.

A link A -> B is measured the way its traffic is delayed: `ping` runs in A's network group (fog node) or in the
root group (the site) towards B's address (127.0.0.1 for the site), so its echo requests take exactly the rules
that A's connections to B take. The verdict and the figure are `netem.validate`'s, the same as for
`gesscale netem measure` (median within max(2 ms, 10%) of the configured RTT on this busy 2-core machine, loss
within chance; docs/wan-emulation.md).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gesscale.latency_map import LatencyMap
from netem.validate import Validation, parse_ping_times, ping_times_command, validate

SITE_ADDRESS = "127.0.0.1"


def _ping_in_group(procs: Path | None, address: str, count: int, interval_s: float) -> tuple[int, list[float]]:
    ping = ping_times_command(address, count, interval_s).split()
    argv = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(procs), *ping] if procs is not None else ping
    res = subprocess.run(argv, capture_output=True, text=True, timeout=count * interval_s + 30)
    return parse_ping_times(res.stdout)


def measure_links(lmap: LatencyMap, links: Sequence[Mapping[str, Any]], hosts: Mapping[str, str], groups: Path,
                  site: str, count: int = 20, interval_s: float = 0.05, parallel: int = 8) -> Validation:
    """Ping every link (`src`, `dst`) from its source's group, a few at a time, and judge it against `lmap`
    (the map in force)."""
    def one(link: Mapping[str, Any]) -> tuple[tuple[str, str], tuple[int, list[float]]]:
        src, dst = str(link["src"]), str(link["dst"])
        procs = None if src == site and src not in hosts else groups / src / "cgroup.procs"
        address = SITE_ADDRESS if dst == site and dst not in hosts else hosts[dst]
        return (src, dst), _ping_in_group(procs, address, count, interval_s)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        pings = dict(pool.map(one, links))
    return validate(lmap, pings, "userspace (testbed)")
