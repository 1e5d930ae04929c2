"""What the testbed's network really does: ping every emulated link from inside its source's group, and judge.

A link A -> B is measured the way its traffic is delayed: `ping` runs in A's network group (fog node) or in the
root group (the site) towards B's address (127.0.0.1 for the site), so its echo requests take exactly the rules
that A's connections to B take. The verdict and the figure are `netem.validate`'s, the same as for
`gesscale netem measure` (median within max(2 ms, 10%) of the configured RTT on this busy 2-core machine, loss
within chance; docs/wan-emulation.md).

`GroupPinger` is the live measured latency map's probe (`gesscale.testbed.latency_monitor`): three pings, from
inside the node's network and CPU groups, with their CPU seconds.
"""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gesscale.latency_map import LatencyMap
from gesscale.testbed.latency_monitor import Probe, ProbeResult
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


class GroupPinger:
    """The live monitor's probe (`gesscale.testbed.latency_monitor.Measurer`): a few pings from inside the source
    node's groups to the destination, with the CPU the probe's process used.

    The ping joins the node's network group (so its echo requests take the node's delay rules through the
    engine, as its connections do) and, while the node has one, its CPU budget group (so it takes from the
    node's budget, as the issue asks: the measurement is paid by the node). `budget_procs(node)` lists the
    budget group's `cgroup.procs` files (none when the node's worker is stopped: the probe then only joins the
    network group). The CPU is the rusage of the probe's process (the shell that joins the groups, then ping),
    read with `wait4`. Each ping stops by itself after `count x interval + 2 s` (`-w`), so a cut pair costs a
    probe at most that.
    """

    def __init__(self, hosts: Mapping[str, str], groups: Path, site: str,
                 budget_procs: Callable[[str], Sequence[Path]], count: int = 3, interval_s: float = 0.1) -> None:
        self.hosts = dict(hosts)
        self.groups = groups
        self.site = site
        self.budget_procs = budget_procs
        self.count = count
        self.interval_s = interval_s

    def argv(self, src: str, dst: str) -> list[str]:
        """The probe's command: join `src`'s groups, then exec ping towards `dst`'s address."""
        address = SITE_ADDRESS if dst == self.site and dst not in self.hosts else self.hosts[dst]
        deadline = max(1, math.ceil(self.count * self.interval_s + 2))
        ping = [*ping_times_command(address, self.count, self.interval_s).split(), "-w", str(deadline)]
        budget = [str(p) for p in self.budget_procs(src)]
        # the network group is a must (the packets' delay depends on it); a budget group that went away meanwhile
        # (the node's worker stopped) is not: the probe then counts in the root group
        joins = "".join(f' echo 0 > "${i}" 2>/dev/null;' for i in range(2, 2 + len(budget)))
        script = f'echo 0 > "$1" && {{{joins} true; }} && shift {1 + len(budget)} && exec "$@"'
        return ["/bin/sh", "-c", script, "probe", str(self.groups / src / "cgroup.procs"), *budget, *ping]

    def __call__(self, probe: Probe) -> ProbeResult:
        """Run the probe; its replies and CPU seconds (user + system)."""
        proc = subprocess.Popen(self.argv(probe.src, probe.dst), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        out = proc.stdout.read().decode(errors="replace")
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here (wait4 gives the rusage)
        sent, times = parse_ping_times(out)
        error = "" if sent else f"the probe did not run (exit {proc.returncode})"
        return ProbeResult(probe, sent, tuple(times), usage.ru_utime + usage.ru_stime, error)
