"""The latency map, really applied between the testbed's fog nodes and the site of its broker and driver.

`TestbedWan.start` makes the per-node network groups (gesscale.testbed.netgroups), starts the userspace delay
daemon (netem.userspace) on a free NFQUEUE, and installs the tagged rules of `gesscale.testbed.wan_plan`; `stop`
removes the rules first (so no packet waits for a queue nobody reads), then the daemon and the groups. A testbed
killed with `kill -9` leaves its chain, daemon and groups behind: `sweep_stale` (run by the next testbed) removes
those of owners that are gone, and nothing else (a chain is ours by its name and comment, a daemon by its tag).

The rules have no `--queue-bypass`: while the daemon is away the testbed's packets wait, so a dead daemon shows
as a stall, never as a network without latency. `health()` says why emulation is not working (daemon gone, queue
not bound, rules missing); the live backend polls it every period and restarts the daemon, recording the gap.

Over a run the map the emulation follows may change (its `changes:`, and a run's `--events`: docs/events.md):
`follow_schedule` starts the run's clock, gives the partitions and flaps their outages from it, and applies each
link change at its time (`gesscale.testbed.wan_events`: the table's contents; here: writing it, SIGHUP, and the
record of when, `wan-events.jsonl`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.testbed.cgroups import sweep_stale as sweep_stale_groups
from gesscale.testbed.netgroups import NetGroups, unified_root
from gesscale.testbed.wan_events import (
    LinkUpdate,
    link_outages,
    link_values,
    outage_records,
    pairs_to_queue,
    table_document,
)
from gesscale.testbed.wan_plan import MARK_MASK, MARK_SHIFT, WanPlan, build_wan_plan, chain_name, choose_site
from netem.userspace import agent, launch
from netem.userspace.agent import bound_queues
from netem.userspace.table import Outages

log = logging.getLogger(__name__)

QUEUE_BASE = 3100  # NFQUEUE numbers tried from here (the testbed's own range: 3100-3199)
_CHAIN = re.compile(r"^-N (GS-tb(\d+))$")


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        return agent.iptables(*args, check=check)
    except agent.AgentError as err:
        raise UserError(str(err)) from None


def _chains() -> list[tuple[str, int]]:
    """Our chains in the mangle table now, with the PID of the testbed that made each."""
    out = _iptables("-S", check=False).stdout.splitlines()
    return [(m.group(1), int(m.group(2))) for line in out if (m := _CHAIN.match(line))]


def _remove_chain(chain: str) -> None:
    """Unhook and delete one of our chains: only the OUTPUT rules jumping to it are touched."""
    for line in _iptables("-S", "OUTPUT", check=False).stdout.splitlines():
        if line.endswith(f"-j {chain}") and "gesscale-netem:" in line:
            _iptables("-D", *_split_rule(line)[1:], check=False)
    _iptables("-F", chain, check=False)
    _iptables("-X", chain, check=False)


def _split_rule(line: str) -> list[str]:
    import shlex

    return shlex.split(line)


def daemon_pids(tag: str) -> list[int]:
    """Delay daemons started for `tag` (found by their command line, so a recycled PID is never signalled)."""
    return launch.daemon_pids(f"gesscale-netem:{tag}")


def sweep_stale() -> list[str]:
    """Remove the chains and daemons of testbeds whose owner process is gone (left by `kill -9`)."""
    removed = []
    with contextlib.suppress(UserError):
        for chain, pid in _chains():
            if not launch.alive(pid):
                _remove_chain(chain)
                removed.append(chain)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            tags = [a.decode() for a in argv if a.startswith(b"gesscale-netem:tb")]
            if launch.MODULE.encode() in argv and tags:
                owner = tags[0].removeprefix("gesscale-netem:tb")
                if owner.isdigit() and not launch.alive(int(owner)):
                    os.kill(int(proc.name), signal.SIGKILL)
                    removed.append(f"daemon {proc.name} ({tags[0]})")
    root = unified_root()
    if root is not None:  # the owners' empty network groups (the chain that pinned them is gone now)
        removed += [str(p) for p in sweep_stale_groups(root)]
    return removed


@dataclass
class WanSettings:
    """What to emulate: the map (its nodes include the testbed's and the site) and the site of broker and driver."""

    latency_map: Any  # gesscale.latency_map.LatencyMap
    site: str | None = None  # None: the node with the smallest worst RTT to the testbed's nodes (choose_site)

    def resolve_site(self, nodes: list[str]) -> str:
        """The site: the one given (checked against the map) or the default."""
        lmap = self.latency_map
        if self.site is not None:
            if self.site not in lmap.nodes:
                raise UserError(f"--site {self.site!r} is not a node of the latency map {lmap.source} "
                                f"({', '.join(lmap.names)})")
            return self.site
        rtt = {(a, b): lmap.rtt(a, b) for a in lmap.names for b in nodes}
        return choose_site(rtt, nodes, lmap.names)


def link_tables(lmap: Any, sites: list[str]) -> tuple[dict[tuple[str, str], float],
                                                        dict[tuple[str, str], tuple[float, float]]]:
    """RTT and (jitter, loss) of every ordered pair of `sites` from the map (jitter and loss when it has them)."""
    rtt: dict[tuple[str, str], float] = {}
    extras: dict[tuple[str, str], tuple[float, float]] = {}
    link = getattr(lmap, "link", None)
    for a in sites:
        for b in sites:
            rtt[(a, b)] = lmap.rtt(a, b)
            if link is not None and a != b:
                spec = link(a, b)
                if spec.jitter_ms or spec.loss_pct:
                    extras[(a, b)] = (float(spec.jitter_ms), float(spec.loss_pct))
    return rtt, extras


@dataclass
class TestbedWan:
    """The running emulation of one testbed: its plan, groups and daemon."""

    __test__ = False

    plan: WanPlan
    groups: NetGroups
    site: str
    run_dir: Path
    daemon_pid: int | None = None
    gaps: list[dict[str, float]] = field(default_factory=list)
    latency_map: Any = None  # the map as written, with its `changes:` (None for an emulation attached to)
    changes_applied: list[dict[str, Any]] = field(default_factory=list)
    # partitions and flaps (gesscale.testbed.wan_events): each link's outages in seconds of the run, written to
    # the table once the run's t = 0 (`t0_unix`) is known
    outages: dict[int, Outages] = field(default_factory=dict)
    t0_unix: float | None = None
    outages_applied: list[dict[str, Any]] = field(default_factory=list)
    _schedule_stop: threading.Event | None = None

    @property
    def config_path(self) -> Path:
        """The daemon's link table (JSON)."""
        return self.run_dir / "wan-links.json"

    @classmethod
    def start(cls, settings: WanSettings, hosts: Mapping[str, str], owner_pid: int, run_dir: Path) -> TestbedWan:
        """Groups, daemon, rules; on failure everything made so far is removed again. The map's partitions and
        flaps get their outages once the run's t = 0 is known (`follow_schedule`)."""
        nodes = list(hosts)
        missing = [n for n in nodes if n not in settings.latency_map.nodes]
        if missing:
            raise UserError(f"nodes {', '.join(missing)} are not in the latency map {settings.latency_map.source}")
        site = settings.resolve_site(nodes)
        sweep_stale()
        groups = NetGroups(owner_pid, nodes)
        sites = sorted({*nodes, site})
        rtt, extras = link_tables(settings.latency_map, sites)
        queue = next((q for q in range(QUEUE_BASE, QUEUE_BASE + 100) if q not in bound_queues()), None)
        if queue is None:
            groups.close()
            raise UserError(f"no free NFQUEUE number in {QUEUE_BASE}-{QUEUE_BASE + 99}")
        plan = build_wan_plan(rtt, extras, dict(hosts), site, groups.parent_name, f"tb{owner_pid}", queue,
                              queued=pairs_to_queue(settings.latency_map, sites))
        wan = cls(plan, groups, site, Path(run_dir), latency_map=settings.latency_map,
                  outages=link_outages(getattr(settings.latency_map, "events", ()), plan.links))
        try:
            wan._write_config()
            wan._start_daemon()
            for args in plan.apply_commands():
                _iptables(*args)
        except BaseException:
            wan.stop()
            raise
        return wan

    def _write_config(self) -> None:
        doc = table_document(self.plan.queue, MARK_MASK, MARK_SHIFT, self.plan.links, self.t0_unix, self.outages)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.config_path)  # the daemon never reads half a table

    def _reload(self) -> float:
        """Tell the daemon to re-read its table (SIGHUP; it keeps the packets it holds); the time of the signal."""
        at = time.time()
        for pid in daemon_pids(self.plan.tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGHUP)
        return at

    def _record(self, entry: dict[str, Any]) -> None:
        """Append what was applied to the run's record (`wan-events.jsonl` beside the table)."""
        with contextlib.suppress(OSError), (self.run_dir / "wan-events.jsonl").open("a") as fh:
            fh.write(json.dumps(entry) + "\n")

    def _start_daemon(self, timeout_s: float = 10.0) -> None:
        logf = (self.run_dir / "wan-daemon.log").open("ab")
        argv = launch.daemon_argv(self.config_path, f"gesscale-netem:{self.plan.tag}")
        proc = subprocess.Popen([sys.executable, *argv], stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        self.daemon_pid = proc.pid
        deadline = time.monotonic() + timeout_s
        while self.plan.queue not in bound_queues():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise UserError(f"the delay daemon did not bind NFQUEUE {self.plan.queue}; see "
                                f"{self.run_dir / 'wan-daemon.log'}")
            time.sleep(0.05)

    def follow(self, t_s: float) -> bool:
        """Give the links the values of the map in force `t_s` seconds into the run (its `changes:`, and the link
        entries of an events file); True when they changed. The daemon takes the new table on SIGHUP, without a
        gap; the change is recorded with the time of the signal (`changes_applied`, `wan-events.jsonl`)."""
        lmap = self.latency_map
        if lmap is None or not getattr(lmap, "change_times", None):
            return False
        new = link_values(lmap.at(t_s), self.plan.links)
        changed = tuple((self.plan.links[i], new[i]) for i in self.plan.links if new[i] != self.plan.links[i])
        if not changed:
            return False
        self.plan.links.update(new)
        self._write_config()
        at = self._reload()
        entry: dict[str, Any] = {**LinkUpdate(t_s, new, changed).to_dict(), "t_s": round(t_s, 1), "at": at}
        if self.t0_unix is not None:
            entry["late_s"] = round(at - (self.t0_unix + t_s), 3)
        self.changes_applied.append(entry)
        self._record({"kind": "link", **entry})
        log.info("WAN emulation: the map's values at t=%.0f s applied", t_s)
        return True

    def follow_schedule(self, t0_wall: float) -> None:
        """Start the run's clock at `t0_wall`: the partitions and flaps count from it (the table gets `t0_unix`
        and the outages, SIGHUP), and each of the map's link changes is applied at its time (a thread). A later
        call starts the schedule again from its own t0, so the run's last word on when it started wins."""
        if self._schedule_stop is not None:
            self._schedule_stop.set()
        self.t0_unix = t0_wall
        if self.outages:
            self._write_config()
            at = self._reload()
            entry = {"kind": "outages", "t0_unix": t0_wall, "at": at,
                     "links": outage_records(self.plan.links, self.outages)}
            self.outages_applied.append(entry)
            self._record(entry)
            log.info("WAN emulation: %d link(s) get partitions or flaps from t0 %.3f", len(self.outages), t0_wall)
        times = list(getattr(self.latency_map, "change_times", None) or [])
        if not times:
            return
        stop = self._schedule_stop = threading.Event()

        def run() -> None:
            self.follow(max(0.0, time.time() - t0_wall))  # a change at t=0, or a run started late
            for t in times:
                if stop.wait(max(0.0, t0_wall + t - time.time())):
                    return
                self.follow(t)

        threading.Thread(target=run, name="gesscale-wan-schedule", daemon=True).start()

    def daemon_cpu_s(self) -> float | None:
        """CPU seconds the running delay daemon has used (user + system), None when it is not running."""
        pids = daemon_pids(self.plan.tag)
        if not pids:
            return None
        try:
            fields = Path(f"/proc/{pids[0]}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def health(self) -> str | None:
        """None while the emulation works; else what is wrong (daemon gone, queue unbound)."""
        if self.daemon_pid is None or not launch.alive(self.daemon_pid) or not daemon_pids(self.plan.tag):
            return "the delay daemon is not running"
        if self.plan.queue not in bound_queues():
            return f"nothing listens on NFQUEUE {self.plan.queue}"
        return None

    def restart(self, reason: str) -> float:
        """Start the daemon again after `reason`; returns how long the emulation was down (s) and records it."""
        t0 = time.time()
        for pid in daemon_pids(self.plan.tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._start_daemon()
        gap = {"at": t0, "restart_s": round(time.time() - t0, 3), "reason": reason}
        self.gaps.append(gap)
        log.warning("WAN emulation: %s; delay daemon restarted in %.2f s", reason, gap["restart_s"])
        return gap["restart_s"]

    def stop(self) -> None:
        """Rules, then daemon, then groups; safe to call twice."""
        if self._schedule_stop is not None:
            self._schedule_stop.set()
        _remove_chain(self.plan.chain)
        for pid in daemon_pids(self.plan.tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while daemon_pids(self.plan.tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in daemon_pids(self.plan.tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.groups.close()

    @classmethod
    def from_state(cls, doc: Mapping[str, Any], run_dir: Path) -> TestbedWan:
        """The emulation another process started, from its `describe()` (to check its health or stop it)."""
        plan = WanPlan(str(doc["chain"]), int(doc["queue"]), str(doc["tag"]))
        wan = cls(plan, NetGroups.attach(Path(doc["groups"])), str(doc["site"]), run_dir, doc.get("daemon_pid"))
        wan.gaps = list(doc.get("gaps") or [])
        return wan

    def describe(self) -> dict[str, Any]:
        """What is emulated, for reports and the state file."""
        return {"site": self.site, "queue": self.plan.queue, "chain": self.plan.chain, "tag": self.plan.tag,
                "groups": str(self.groups.parent), "daemon_pid": self.daemon_pid, "gaps": self.gaps,
                "changes_applied": self.changes_applied, "outages_applied": self.outages_applied,
                "t0_unix": self.t0_unix,
                "links": [{"src": v.src, "dst": v.dst, "rtt_ms": v.delay_ms, "jitter_ms": v.jitter_ms,
                           "loss_pct": v.loss_pct} for v in self.plan.links.values()]}


def chain_of(owner_pid: int) -> str:
    """The chain a testbed owned by `owner_pid` installs."""
    return chain_name(f"tb{owner_pid}")
