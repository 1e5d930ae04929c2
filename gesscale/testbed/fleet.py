"""The local fog fleet: one Spark standalone master and N fog nodes, each a 1-core worker on its own loopback
address inside its own cgroup CPU budget.

Node `fogK` of the latency map runs on 127.0.0.(30+K) (the testbed's address block). Workers are started and
stopped on demand (a scale-up starts the chosen node's worker, a scale-down stops it), so the set of running
workers is the set of nodes that may host an executor: placement is enforced, not assumed.

The budget holds what processes records: the executor JVM and its Python workers. The worker daemon itself (the
node's agent, which only launches executors) runs outside it, and a watcher thread moves every process the
worker launches into the node's group within a fraction of a second; so a node comes up in seconds while its
processing capacity is the budget's.

Everything the fleet started is written to `<run_dir>/testbed.json` (PIDs with the command they run, the cgroup
parent), so another process — a controller restarted after a crash — can attach to the same fleet and
`close()` from any of them stops every process and removes every cgroup.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gesscale.errors import UserError
from gesscale.names import check_name
from gesscale.process import ManagedProcess, group_members, port_is_free
from gesscale.testbed.cgroups import CgroupTree, process_tree
from jobs import spark_security

log = logging.getLogger(__name__)

STATE_FILE = "testbed.json"
HOST_BASE = 30  # fogK -> 127.0.0.(30+K)
MASTER_HOST = "127.0.0.1"


@dataclass(frozen=True)
class FleetPorts:
    """The TCP ports of one fleet (all in the testbed's 15000-15999 block by default)."""

    master: int = 15077
    master_ui: int = 15078
    worker_base: int = 15100  # worker of node index i listens on worker_base + i
    worker_ui_base: int = 15200


def node_host(name: str, index: int) -> str:
    """Loopback address of a node: fogK -> 127.0.0.(30+K); other names by their position in the map."""
    digits = "".join(ch for ch in name if ch.isdigit())
    k = int(digits) if name.startswith("fog") and digits else index + 1
    if not 1 <= k <= 225:
        raise UserError(f"node {name!r}: no loopback address for it")
    return f"127.0.0.{HOST_BASE + k}"


@dataclass
class FogNode:
    """A fog node of the local testbed: where its Spark worker listens and its CPU budget (cores)."""

    name: str
    host: str
    port: int
    ui_port: int
    cores: float


@dataclass
class FleetState:
    """What `testbed.json` holds."""

    owner_pid: int
    t0: float
    master_url: str
    master_pid: int | None
    nodes: dict[str, FogNode]
    workers: dict[str, int] = field(default_factory=dict)  # node -> worker pid
    extra: dict[str, Any] = field(default_factory=dict)  # the job's settings (gesscale.testbed.job)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = asdict(self)
        d["nodes"] = {k: asdict(v) for k, v in self.nodes.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FleetState:
        """Inverse of `to_dict`."""
        return cls(d["owner_pid"], d["t0"], d["master_url"], d.get("master_pid"),
                   {k: FogNode(**v) for k, v in d["nodes"].items()}, dict(d.get("workers") or {}),
                   dict(d.get("extra") or {}))


def _spark_daemon(pid: int, cls: str, host: str, log: Path) -> ManagedProcess:
    """The Spark daemon `cls` bound to `host` that the state file names by PID: recognised by its command line
    (never signal a recycled PID); SIGTERM, then SIGKILL after 15 s, reach its process group, and a stop sweeps
    what the group still holds (the executors it launched, their Python workers)."""
    return ManagedProcess(pid, [], log, group=True, owns=lambda argv: any(cls in a for a in argv) and host in argv)


def _pids_in(procs_files: list[Path]) -> list[int]:
    """The PIDs listed in cgroup `procs_files` (a missing group lists none)."""
    out: list[int] = []
    for f in procs_files:
        with contextlib.suppress(OSError, ValueError):
            out.extend(int(x) for x in f.read_text().split())
    return out


def _is_spark_daemon(pid: int, cls: str, host: str) -> bool:
    """True when `pid` still runs the Spark daemon `cls` bound to `host`."""
    return _spark_daemon(pid, cls, host, Path(os.devnull)).alive()


class Fleet:
    """Start/stop the master and the fog nodes' workers; persists its state for attached processes."""

    def __init__(self, run_dir: Path, state: FleetState, cgroups: CgroupTree) -> None:
        self.run_dir = run_dir
        self.state = state
        self.cgroups = cgroups
        self._closed = False
        self._save_lock = threading.Lock()  # the controller's thread and the node events' both save
        self._stop_watch = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="gesscale-fleet-confine", daemon=True)
        self._watcher.start()

    def _watch(self, poll_s: float = 0.1) -> None:
        """Move what each running worker launched (executor JVM, Python workers) into the node's budget."""
        while not self._stop_watch.wait(poll_s):
            try:
                self.confine()
            except OSError as err:  # a process ended mid-pass: the next pass sees the new state
                log.debug("confine pass skipped: %s", err)

    def confine(self) -> int:
        """One pass of the watcher; returns how many processes it moved."""
        moved = 0
        for name, pid in list(self.state.workers.items()):
            budget = self.cgroups.budgets.get(name)
            if budget is None:
                continue
            inside = set(budget.pids())
            for child in process_tree(pid)[1:]:
                if child not in inside:
                    moved += budget.add(child)
        return moved

    # -- creation and attachment --------------------------------------------------------------------------
    @classmethod
    def create(cls, run_dir: Path, node_names: list[str], cores: float = 0.25,
               ports: FleetPorts | None = None) -> Fleet:
        """Start a master (no budget: it stands for the cloud side) and prepare the nodes (workers start later)."""
        from jobs.standalone import start_master

        ports = ports or FleetPorts()
        if not node_names:
            raise UserError("the testbed needs at least one node")
        if cores <= 0 or cores > 1:
            raise UserError(f"--node-cpu must be in (0, 1] cores, got {cores}")
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        nodes = {}
        for i, name in enumerate(node_names):
            check_name("node", name, "testbed node")  # a folder, a cgroup and a log file are named after it
            host = node_host(name, i)
            nodes[name] = FogNode(name, host, ports.worker_base + i, ports.worker_ui_base + i, cores)
            for port in (ports.worker_base + i, ports.worker_ui_base + i):
                if not port_is_free(port, host):
                    raise UserError(f"port {host}:{port} for node {name} is taken (another testbed running?)")
        cgroups = CgroupTree()
        try:
            # a fresh secret per run; master, workers and the job all read it (jobs/spark_security.py)
            secured = spark_security.create(run_dir)
            master = start_master(MASTER_HOST, ports.master, ports.master_ui, run_dir / "master",
                                  secured_conf=secured)
        except BaseException:
            cgroups.close()
            raise
        state = FleetState(os.getpid(), time.time(), f"spark://{MASTER_HOST}:{ports.master}",
                           master.process.pid, nodes)
        fleet = cls(run_dir, state, cgroups)
        fleet.save()
        return fleet

    @classmethod
    def attach(cls, run_dir: Path) -> Fleet:
        """Join a fleet another process created (its state file must exist and its master must run)."""
        path = Path(run_dir).resolve() / STATE_FILE
        try:
            state = FleetState.from_dict(json.loads(path.read_text()))
        except FileNotFoundError:
            raise UserError(f"no testbed at {run_dir} ({STATE_FILE} missing)") from None
        except (ValueError, KeyError, TypeError) as err:
            raise UserError(f"{path}: not a testbed state file ({err})") from None
        if state.master_pid is None or not _is_spark_daemon(state.master_pid, "deploy.master.Master", MASTER_HOST):
            raise UserError(f"the testbed at {run_dir} is not running (its Spark master is gone)")
        cgroups = CgroupTree(owner_pid=state.owner_pid)
        fleet = cls(Path(run_dir).resolve(), state, cgroups)
        for name, info in state.nodes.items():
            if name in state.workers:
                cgroups.budget(name, info.cores)
        return fleet

    def save(self) -> None:
        """Write the state file atomically."""
        path = self.run_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        with self._save_lock:
            tmp.write_text(json.dumps(self.state.to_dict(), indent=1))
            os.chmod(tmp, 0o600)  # it holds the job's hook token
            os.replace(tmp, path)

    def reload(self) -> None:
        """Re-read the state file (another process may have changed the workers)."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            self.state = FleetState.from_dict(json.loads((self.run_dir / STATE_FILE).read_text()))

    # -- nodes --------------------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """Every node, in map order."""
        return list(self.state.nodes)

    def host_of(self, name: str) -> str:
        """Loopback address of a node."""
        return self.state.nodes[name].host

    def node_at(self, host: str) -> str | None:
        """The node whose worker listens on `host`."""
        return next((n for n, i in self.state.nodes.items() if i.host == host), None)

    def worker_running(self, name: str) -> bool:
        """True when the node's worker process is alive."""
        pid = self.state.workers.get(name)
        return pid is not None and _is_spark_daemon(pid, "deploy.worker.Worker", self.host_of(name))

    def running(self) -> list[str]:
        """Nodes whose worker runs, in map order."""
        return [n for n in self.names if self.worker_running(n)]

    def start_worker(self, name: str) -> int:
        """Start the node's worker inside its CPU budget; returns its PID (no-op when it already runs)."""
        from jobs.standalone import start_worker

        if name not in self.state.nodes:
            raise UserError(f"unknown node {name!r}; the testbed has {', '.join(self.names)}")
        if self.worker_running(name):
            return self.state.workers[name]
        info = self.state.nodes[name]
        self.cgroups.budget(name, info.cores)
        groups = self.state.extra.get("net_groups")  # the WAN emulation's per-node groups (gesscale.testbed.wan)
        daemon = start_worker(self.state.master_url, info.host, info.port, info.ui_port,
                              self.run_dir / "nodes" / name, cores=1,
                              cgroup_procs=Path(groups) / name / "cgroup.procs" if groups else None,
                              secured_conf=spark_security.existing(self.run_dir))
        # The worker daemon stays outside the budget (see the module doc); the watcher confines what it launches.
        self.state.workers[name] = daemon.process.pid
        self.save()
        return daemon.process.pid

    def stop_worker(self, name: str) -> None:
        """Stop the node's worker with everything it started, and remove its cgroup."""
        pid = self.state.workers.pop(name, None)
        if pid is not None:
            host = self.host_of(name)
            log_path = self.run_dir / "nodes" / name / f"worker-{host}.log"  # as jobs.standalone.start_worker names it
            _spark_daemon(pid, "deploy.worker.Worker", host, log_path).stop(15.0, sweep_group=True)
        budget = self.cgroups.budgets.get(name)
        if budget is not None:
            for left in budget.pids():  # anything that escaped the process group but not the cgroup
                with contextlib.suppress(ProcessLookupError):
                    os.kill(left, signal.SIGKILL)
            self.cgroups.release(name)
        self.save()

    def kill_worker(self, name: str, timeout_s: float = 5.0) -> list[int]:
        """A crash of the node: SIGKILL at once to its worker's process group (the worker, the executor JVM it
        launched), then to every process left in the node's CPU budget group and network group (the executor's
        Python workers, which make a process group of their own), until both are empty; the budget group is
        removed. Returns the PIDs signalled. Nothing is asked to stop: no shutdown hook runs, as on a node that
        loses power. No-op (empty list) when the node has no worker."""
        pid = self.state.workers.pop(name, None)
        if pid is None:
            return []
        host = self.host_of(name)
        daemon = _spark_daemon(pid, "deploy.worker.Worker", host, Path(os.devnull))
        signalled = [pid] if daemon.alive() else []
        daemon.kill()  # killpg(SIGKILL), only while the PID still runs our worker
        groups = self.state.extra.get("net_groups")
        procs = [Path(groups) / name / "cgroup.procs"] if groups else []
        budget = self.cgroups.budgets.get(name)
        deadline = time.monotonic() + timeout_s
        while True:
            # the worker's group only when the PID was still our worker (never a recycled PID's group)
            left = sorted({*(group_members(pid) if signalled else []), *(budget.pids() if budget is not None else []),
                           *_pids_in(procs)})
            for p in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p, signal.SIGKILL)
            signalled.extend(p for p in left if p not in signalled)
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # the worker is our child when this process started it
        if budget is not None:
            self.cgroups.release(name)
        self.save()
        return signalled

    @property
    def closed(self) -> bool:
        """True once `close()` ran (a late node event must not act on a torn-down fleet)."""
        return self._closed

    def cpu_seconds(self, name: str) -> float:
        """CPU seconds the node's processes used since its budget was made (0 when it has none)."""
        budget = self.cgroups.budgets.get(name)
        return budget.usage_s() if budget is not None else 0.0

    # -- teardown -----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every worker and the master, remove every cgroup and the state file; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop_watch.set()
        self._watcher.join(5)
        self.reload()
        for name in list(self.state.workers):
            self.stop_worker(name)
        pid = self.state.master_pid
        if pid is not None:
            log_path = self.run_dir / "master" / "master.log"
            _spark_daemon(pid, "deploy.master.Master", MASTER_HOST, log_path).stop(15.0, sweep_group=True)
        self.cgroups.close()
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / STATE_FILE).unlink()
