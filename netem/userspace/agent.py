"""What runs on a host for the userspace engine: `python -m netem.userspace.agent VERB SPEC` (SPEC: base64 JSON).

Verbs, each printing one JSON line:

- `apply`: write the link table, start the daemon (or SIGHUP the running one: new values, no gap), wait until
  its queue is bound, then make the node's tagged rules exactly the plan's (rules before daemon would stall
  packets); leftovers of the same label (a crashed run) are replaced, nothing else is touched;
- `clear`: delete the rules whose comment is the label (or starts with it, for `gesscale-netem:TAG:`), stop the
  daemons carrying it, remove the state dir;
- `health`: a snapshot (daemon PIDs, queue bound, rule packet counters, the daemon's counters) for
  `netem.userspace.health`;
- `restart`: kill the daemon and start it again from its link table on disk.

The same code serves local hosts (run directly) and SSH hosts (run by the service through the remote shell).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from netem.userspace.launch import LABEL_PATTERN, alive, daemon_argv, daemon_pids, pid_file, stats_file
from netem.userspace.rules import STATE_ROOT, parse_rules

QUEUE_PROC = Path("/proc/net/netfilter/nfnetlink_queue")
BIND_TIMEOUT_S = 10.0


class AgentError(RuntimeError):
    """Something on the host prevents the verb (printed as {"error": ...}, exit 1)."""


def iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`iptables -w 5 -t mangle ARGS` (argument list, no shell)."""
    try:
        res = subprocess.run(["iptables", "-w", "5", "-t", "mangle", *args], capture_output=True, text=True,
                             timeout=30)  # fmt: skip
    except FileNotFoundError:
        raise AgentError("iptables is not installed (Debian package iptables)") from None
    if check and res.returncode != 0:
        raise AgentError(f"iptables -t mangle {' '.join(args)}: {res.stderr.strip() or res.returncode}")
    return res


def bound_queues(text: str | None = None) -> set[int]:
    """Queue numbers some program listens on (first column of /proc/net/netfilter/nfnetlink_queue)."""
    if text is None:
        try:
            text = QUEUE_PROC.read_text()
        except OSError:
            return set()
    return {int(f[0]) for f in (line.split() for line in text.splitlines()) if f and f[0].isdigit()}


def _check_label(label: str) -> str:
    if not LABEL_PATTERN.match(label):
        raise AgentError(f"bad label {label!r}")
    return label


def _state_dir(spec: dict[str, Any]) -> Path:
    path = Path(str(spec["state_dir"])).resolve()
    if path.parent != Path(STATE_ROOT) or not path.name:
        raise AgentError(f"state dir {path} is not under {STATE_ROOT}")
    return path


def our_rules(label: str) -> list[tuple[list[str], int]]:
    """This label's rules in the mangle OUTPUT chain, with their packet counters."""
    return parse_rules(iptables("-v", "-S", "OUTPUT").stdout, label)


def stop_daemons(label: str, timeout_s: float = 5.0) -> list[int]:
    """SIGTERM the daemons carrying `label` (exactly, or by prefix for `...:`), SIGKILL what is left."""
    def pids() -> list[int]:
        if label.endswith(":"):
            return sorted({p for p in _all_daemons() if _label_of(p, label)})
        return daemon_pids(label)

    found = pids()
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return found


def _all_daemons() -> list[int]:
    return daemon_pids("netem.userspace")  # the module name is in every daemon's argv


def _label_of(pid: int, prefix: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(a.decode(errors="replace").startswith(prefix) for a in argv)


def start_daemon(config: Path, label: str, queue: int) -> int:
    """Start a daemon for `config` in its own session and wait until `queue` is bound; its PID."""
    if queue in bound_queues():
        raise AgentError(f"NFQUEUE {queue} is already bound by another program")
    log = (config.parent / "daemon.log").open("ab")
    proc = subprocess.Popen([sys.executable, *daemon_argv(config, label)], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd="/")  # fmt: skip
    log.close()
    deadline = time.monotonic() + BIND_TIMEOUT_S
    while queue not in bound_queues():
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            tail = (config.parent / "daemon.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise AgentError(f"the delay daemon did not bind NFQUEUE {queue}: {' | '.join(tail)}")
        time.sleep(0.05)
    return proc.pid


def _reloads(config: Path) -> tuple[int, str | None]:
    try:
        stats = json.loads(stats_file(config).read_text())
    except (OSError, ValueError):
        return -1, None
    return int(stats.get("reloads", 0)), stats.get("reload_error")


def reload_daemon(config: Path, pids: list[int], timeout_s: float = 5.0) -> None:
    """SIGHUP the daemon and wait until its counters show the new table in force (or refused: AgentError)."""
    before = _reloads(config)[0]
    for pid in pids:
        os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        count, error = _reloads(config)
        if error:
            raise AgentError(f"the delay daemon refused the new link table: {error}")
        if count > before:
            return
        time.sleep(0.02)
    raise AgentError(f"the delay daemon did not confirm the new link table within {timeout_s:g} s")


def apply(spec: dict[str, Any]) -> dict[str, Any]:
    """See the module docstring; returns {"changed", "daemon", "pid"}."""
    label = _check_label(str(spec["label"]))
    state = _state_dir(spec)
    queue = int(spec["queue"])
    wanted = [[str(a) for a in r] for r in spec["rules"]]
    for rule in wanted:
        if rule[:2] != ["-A", "OUTPUT"] or rule[rule.index("--comment") + 1] != label:
            raise AgentError(f"rule {rule} does not carry the label {label}")
    state.mkdir(parents=True, exist_ok=True)
    config = state / "links.json"
    new_table = json.dumps(spec["table"], indent=1, sort_keys=True)
    old_table = config.read_text() if config.exists() else None
    tmp = config.with_name("links.json.tmp")
    tmp.write_text(new_table)
    os.replace(tmp, config)
    running = daemon_pids(label)
    if running and queue in bound_queues() and old_table is not None and json.loads(old_table)["queue"] == queue:
        daemon = "unchanged" if old_table == new_table else "reloaded"
        if daemon == "reloaded":
            reload_daemon(config, running)
        pid = running[0]
    else:
        stop_daemons(label)
        pid = start_daemon(config, label, queue)
        daemon = "started"
    current = [r for r, _ in our_rules(label)]
    rules_changed = current != wanted
    if rules_changed:
        for rule in current:
            iptables("-D", *rule[1:], check=False)
        for rule in wanted:
            iptables(*rule)
    return {"changed": rules_changed or daemon != "unchanged", "daemon": daemon, "pid": pid}


def clear(spec: dict[str, Any]) -> dict[str, Any]:
    """Remove this label's rules, daemons and state dir (a label ending in ':' means every node of a tag)."""
    label = str(spec["label"])
    if not label.startswith("gesscale-netem:") or len(label) <= len("gesscale-netem:"):
        raise AgentError(f"bad label {label!r}")
    rules = our_rules(label)
    for rule, _ in rules:
        iptables("-D", *rule[1:])
    stopped = stop_daemons(label)
    if spec.get("state_dir"):
        state = _state_dir(spec)
        shutil.rmtree(state, ignore_errors=True)
    elif label.endswith(":"):
        tag = label[len("gesscale-netem:") : -1]
        for d in Path(STATE_ROOT).glob(f"{tag}.*"):
            shutil.rmtree(d, ignore_errors=True)
    return {"rules_removed": len(rules), "daemons_stopped": stopped}


def health(spec: dict[str, Any]) -> dict[str, Any]:
    """A snapshot of the node's emulation (judged by netem.userspace.health)."""
    label = _check_label(str(spec["label"]))
    state = _state_dir(spec)
    config = state / "links.json"
    stats: dict[str, Any] | None = None
    with contextlib.suppress(OSError, ValueError):
        stats = json.loads(stats_file(config).read_text())
    pidf: int | None = None
    with contextlib.suppress(OSError, ValueError):
        pidf = int(pid_file(config).read_text().strip())
    rules = our_rules(label)
    return {"label": label, "queue": int(spec["queue"]), "pids": daemon_pids(label),
            "pid_file": pidf if pidf is not None and alive(pidf) else None,
            "queue_bound": int(spec["queue"]) in bound_queues(), "rules": len(rules),
            "rule_packets": sum(p for _, p in rules), "stats": stats, "now": time.time()}  # fmt: skip


def restart(spec: dict[str, Any]) -> dict[str, Any]:
    """Kill the daemon and start it again from the link table on disk (the rules stay)."""
    label = _check_label(str(spec["label"]))
    config = _state_dir(spec) / "links.json"
    if not config.exists():
        raise AgentError(f"{config} is missing: apply first")
    t0 = time.monotonic()
    for pid in daemon_pids(label):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while int(spec["queue"]) in bound_queues() and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = start_daemon(config, label, int(spec["queue"]))
    return {"pid": pid, "restart_s": round(time.monotonic() - t0, 3)}


VERBS = {"apply": apply, "clear": clear, "health": health, "restart": restart}


def encode(spec: dict[str, Any]) -> str:
    """A spec as one shell-safe word (base64 of its JSON)."""
    return base64.b64encode(json.dumps(spec, separators=(",", ":")).encode()).decode()


def main(argv: list[str] | None = None) -> int:
    """Run one verb on this host; prints one JSON line, exit 0, or {"error": ...} and exit 1."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in VERBS:
        print(json.dumps({"error": f"usage: python -m netem.userspace.agent {{{'|'.join(VERBS)}}} SPEC"}))
        return 2
    try:
        spec = json.loads(base64.b64decode(args[1], validate=True))
        out = VERBS[args[0]](spec)
    except (AgentError, KeyError, ValueError, TypeError) as err:
        print(json.dumps({"error": f"{type(err).__name__}: {err}" if not isinstance(err, AgentError) else str(err)}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
