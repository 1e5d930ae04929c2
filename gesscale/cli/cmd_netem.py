"""`gesscale netem plan|probe|apply|clear|measure`: per-destination WAN latencies from a latency map."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from gesscale.cli.ranges import number_range
from gesscale.config import DAY_S
from gesscale.errors import UserError
from gesscale.events import MAX_EVENT_S
from gesscale.latency_map import MAX_RTT_MS, LatencyMap, load_latency_map
from netem.engines import LINK_EVENTS, check_engine, pick_engine, userspace_plans
from netem.hosts import Host, hosts_for_map, load_inventory
from netem.plan import MODES, NodePlan, iter_plans
from netem.playbooks import run_playbook
from netem.remote import HostRemote
from netem.run import Options, clear_userspace_tag, needs_devices, resolve, userspace_service
from netem.run import measure as measure_pairs
from netem.service import NetemService
from netem.validate import format_validation, plot_validation

VIAS = ("fabric", "ansible")
MAP_TIME = number_range(0, MAX_EVENT_S)  # `--at`: a time of the map's schedule, as its events may have (events.py)
MAX_PINGS = 10_000  # `measure --count`: pings per pair
MAX_TOLERANCE_PCT = 1000.0  # `measure --tolerance-pct`: 10 times the configured RTT

_INVENTORY_HELP = "Ansible inventory file or folder naming the hosts of the map, e.g. inventory/pi10."
_MAP_HELP = "Latency map YAML (nodes + rtt_ms), e.g. inventory/latency/pi10.yaml."
_MODE_HELP = (
    "netem: leaf `netem delay rtt/2` per destination. structural: the same htb/u32 tree with pfifo leaves, for "
    "kernels without netem (classification checked by class counters, no delay)."
)
_ENGINE_HELP = (
    "kernel: tc htb + netem leaves (needs sch_netem). userspace: tagged NFQUEUE rules + a delay daemon per node "
    "(any kernel with NFQUEUE; bandwidth by htb). auto: kernel if every host has netem (probed in a throwaway "
    "namespace), else userspace; always userspace for local hosts."
)
_TAG_HELP = "Tag of the userspace engine's rules and daemons (gesscale-netem:TAG:NODE); clear removes only these."
_PYTHON_HELP = "Python on SSH hosts that can import gesscale's netem package (default: netem_python or python3)."
_VIA_HELP = "fabric: gesscale's own parallel SSH. ansible: the netem role (playbooks/netem.yml). Same plan."


def _load(inventory: Path, map_path: Path) -> tuple[dict[str, Host], LatencyMap]:
    lmap = load_latency_map(map_path)
    if (note := lmap.unapplied_events("netem", applied=LINK_EVENTS)) is not None:
        typer.echo(f"gesscale: warning: {note}", err=True)
    hosts = hosts_for_map(load_inventory(inventory), lmap, str(inventory))
    return hosts, lmap


def _kernel_note(lmap: LatencyMap) -> None:
    """Warn that the kernel engine leaves the map's partitions and flaps out (only the userspace engine has them)."""
    cut = [e for e in lmap.events if e.kind in LINK_EVENTS]
    if cut:
        kinds = ", ".join(sorted({e.kind for e in cut}))
        typer.echo(f"gesscale: warning: {lmap.source}: {len(cut)} fog event(s) ({kinds}) in changes: are not applied "
                   "by the kernel engine (the userspace engine applies them: docs/events.md)", err=True)


def _ms(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def plan_summary(plan: NodePlan) -> str:
    """One line per peer of a kernel plan, saying what its leaf applies: netem mode the delay, jitter, loss and
    rate; structural mode only the classification and rate (its pfifo leaves delay nothing: no delay shown)."""
    head = f"{plan.node} dev {plan.device} ({plan.mode})"
    rows = []
    for r in plan.rules:
        if plan.mode == "netem":
            what = f"delay {_ms(r.delay_ms)} ms"
            what += f" jitter {_ms(r.jitter_ms)} ms" if r.jitter_ms else ""
            what += f" loss {_ms(r.loss_pct)} %" if r.loss_pct else ""
        else:
            what = "no delay (pfifo: classified only)"
        what += f" rate {_ms(r.bandwidth_mbit)} Mbit/s" if r.bandwidth_mbit else ""
        rows.append(f"  -> {r.peer:<12} {r.address:<15} class {r.classid:<6} {what}")
    return "\n".join([head, *rows])


def _check_choice(value: str, allowed: tuple[str, ...], flag: str) -> None:
    if value not in allowed:
        raise UserError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")


def _run_role(console: Console, inventory: Path, lmap: LatencyMap, mode: str, state: str) -> None:
    from gesscale.cli.cmd_provision import live_progress, print_recap

    result = run_playbook(
        "netem", inventory, progress=live_progress(console),
        extra_vars={"netem_latency_map": str(Path(lmap.source).resolve()), "netem_mode": mode,
                    "netem_state": state, "netem_hosts": ",".join(lmap.names)},
    )  # fmt: skip
    print_recap(console, result)
    if not result.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `netem` command group."""
    netem = typer.Typer(
        help="Emulate WAN latencies between nodes from a latency map (htb + per-destination netem + u32), "
        "and measure what the network achieves.",
        no_args_is_help=True,
    )
    app.add_typer(netem, name="netem")

    @netem.command("plan")
    def plan(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        mode: str = typer.Option("netem", "--mode", help=_MODE_HELP),
        device: str = typer.Option(
            "eth0", "--device", help="Interface shown for hosts without netem_device in the inventory "
            "(apply finds the real one with `ip route get`)."
        ),  # fmt: skip
        script: bool = typer.Option(False, "--script", help="Print each node's tc script, not only the summary."),
        engine: str = typer.Option("auto", "--engine", help=_ENGINE_HELP + " plan does not probe: auto shows the "
                                   "userspace plan for local hosts, else the kernel plan."),
        tag: str = typer.Option("wan", "--tag", help=_TAG_HELP),
        allow_reorder: bool = typer.Option(False, "--allow-reorder", help="Let jitter reorder a flow's packets."),
        queue_bypass: bool = typer.Option(False, "--queue-bypass", help="Userspace: rules let packets pass "
                                          "undelayed when no daemon listens (fail open; health still tells)."),
        at_s: float | None = typer.Option(None, "--at", **MAP_TIME, help="Plan the map in force at this time (s) "
                                          "of its changes: schedule."),
    ) -> None:
        """Print each node's plan (touches no host): tc tree (kernel) or tagged rules and links (userspace)."""
        _check_choice(mode, MODES, "--mode")
        check_engine(engine)
        hosts, lmap = _load(inventory, map_path)
        lmap = lmap if at_s is None else lmap.at(at_s)
        if engine == "auto":
            engine = "userspace" if any(h.local for h in hosts.values()) else "kernel"
        pick_engine(engine, list(hosts.values()), None)
        if engine == "userspace":
            for p in userspace_plans(lmap, hosts, tag, allow_reorder, queue_bypass).values():
                typer.echo(p.describe())
                if script:
                    typer.echo(p.rules_text(), nl=False)
            return
        _kernel_note(lmap)
        devices = {n: h.device or device for n, h in hosts.items()}
        plans = iter_plans(lmap, {n: h.address or "" for n, h in hosts.items()}, devices, mode, reorder=allow_reorder)
        for warning in lmap.warnings:
            typer.echo(f"warning: {warning}", err=True)
        for node, p in plans:  # one node at a time: a large map never holds every plan
            typer.echo(p.apply_script() if script else plan_summary(p))
            if not hosts[node].device:
                typer.echo(f"  (netem_device not set for {node}: shown as {device})")

    @netem.command("probe")
    def probe(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
    ) -> None:
        """Ask every host of the map whether its kernel has netem (changes nothing); exit 1 if one has not."""
        hosts, lmap = _load(inventory, map_path)
        remote = HostRemote()
        try:
            results = NetemService(hosts, lmap, remote).probe()
        finally:
            remote.close()
        for r in results:
            typer.echo(f"{r.host:<12} netem {'yes' if r.netem else 'NO  — ' + r.detail}")
        if not all(r.netem for r in results):
            raise typer.Exit(1)

    @netem.command("apply")
    def apply(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        mode: str = typer.Option("netem", "--mode", help=_MODE_HELP + " (kernel engine)"),
        via: str = typer.Option("fabric", "--via", help=_VIA_HELP),
        engine: str = typer.Option("auto", "--engine", help=_ENGINE_HELP),
        tag: str = typer.Option("wan", "--tag", help=_TAG_HELP),
        allow_reorder: bool = typer.Option(False, "--allow-reorder", help="Let jitter reorder a flow's packets "
                                           "(netem's behaviour); by default a flow's packets keep their order."),
        queue_bypass: bool = typer.Option(False, "--queue-bypass", help="Userspace: a dead daemon lets packets "
                                          "pass undelayed instead of stalling them (only `netem health` tells)."),
        python: str | None = typer.Option(None, "--python", help=_PYTHON_HELP),
        at_s: float | None = typer.Option(None, "--at", **MAP_TIME, help="Apply the map in force at this time (s) "
                                          "of its changes: schedule; on running daemons only the values change. "
                                          "Userspace: its partitions and flaps follow the clock from here (now is "
                                          "map time T; 0 without --at)."),
    ) -> None:
        """Apply the plan on every host of the map (idempotent; same plan = no change).

        All inputs are checked first (map vs inventory, addresses, devices, the engine on every host): on any
        problem no host is touched.
        """
        _check_choice(mode, MODES, "--mode")
        _check_choice(via, VIAS, "--via")
        check_engine(engine)
        hosts, lmap = _load(inventory, map_path)
        opts = Options(engine, tag, allow_reorder, queue_bypass, python, at_s)
        remote = HostRemote()
        try:
            chosen, why = resolve(hosts, lmap, remote, opts)
            typer.echo(f"engine: {chosen} ({why})")
            if chosen == "userspace":
                devices = NetemService(hosts, lmap, remote).devices() if needs_devices(lmap) else {}
                out = userspace_service(hosts, lmap, remote, opts, devices).apply()
                if any(e.kind in LINK_EVENTS for e in lmap.events):
                    typer.echo(f"partitions and flaps: now is map time {at_s or 0:g} s; the daemons follow the clock")
                for node, res in out.items():
                    typer.echo(f"{node:<12} {'applied' if res['changed'] else 'unchanged'} (daemon {res['daemon']}, "
                               f"pid {res['pid']})")
                return
            _kernel_note(lmap)
            if via == "ansible":
                _run_role(Console(highlight=False), inventory, lmap, mode, "present")
                return
            changed = NetemService(hosts, lmap if at_s is None else lmap.at(at_s), remote, mode).apply()
        finally:
            remote.close()
        for node, did in changed.items():
            typer.echo(f"{node:<12} {'applied' if did else 'unchanged (plan already in place)'}")

    @netem.command("clear")
    def clear(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        via: str = typer.Option("fabric", "--via", help=_VIA_HELP),
        engine: str = typer.Option("auto", "--engine", help="Which engine's state to remove; auto: both (the "
                                   "userspace one by tag; the kernel tc tree on SSH hosts)."),
        tag: str = typer.Option("wan", "--tag", help=_TAG_HELP),
        python: str | None = typer.Option(None, "--python", help=_PYTHON_HELP),
    ) -> None:
        """Remove the emulation from every host of the map: only rules and daemons of the tag, and the tc tree."""
        _check_choice(via, VIAS, "--via")
        check_engine(engine)
        hosts, lmap = _load(inventory, map_path)
        remote = HostRemote()
        try:
            if engine in ("auto", "userspace"):
                removed = clear_userspace_tag(hosts, remote, Options(engine, tag, python=python))
                typer.echo(f"userspace: removed {removed} rule(s) tagged gesscale-netem:{tag}:")
            ssh_hosts = {n: h for n, h in hosts.items() if not h.local}
            if engine in ("auto", "kernel") and ssh_hosts:
                if via == "ansible":
                    _run_role(Console(highlight=False), inventory, lmap, "netem", "absent")
                else:
                    NetemService(hosts, lmap, remote).clear()
        finally:
            remote.close()
        typer.echo(f"cleared {len(hosts)} host(s)")

    @netem.command("health")
    def health(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        tag: str = typer.Option("wan", "--tag", help=_TAG_HELP),
        python: str | None = typer.Option(None, "--python", help=_PYTHON_HELP),
        interval_s: float = typer.Option(2.0, "--interval", **number_range(0.5, DAY_S),
                                         help="Seconds between the two snapshots whose counters are compared."),
        restart: bool = typer.Option(False, "--restart", help="Restart the daemons of unhealthy nodes, then check."),
        at_s: float | None = typer.Option(None, "--at", **MAP_TIME,
                                          help="The map time the emulation was applied for."),
    ) -> None:
        """Check the userspace emulation of every node (daemon alive, queue bound, rules in place, packets that
        the rules match reach the daemon); exit 1 if a node is not healthy."""
        import time

        hosts, lmap = _load(inventory, map_path)
        remote = HostRemote()
        try:
            svc = userspace_service(hosts, lmap, remote, Options("userspace", tag, python=python, at_s=at_s))
            svc.health()
            time.sleep(interval_s)
            verdicts = svc.health()
            bad = [v.node for v in verdicts if not v.ok]
            if bad and restart:
                for node, res in svc.restart(bad).items():
                    typer.echo(f"{node:<12} restarted (pid {res['pid']}, {res['restart_s']} s)")
                svc.health()
                time.sleep(interval_s)
                verdicts = svc.health()
        finally:
            remote.close()
        for v in verdicts:
            typer.echo(f"{v.node:<12} {'ok' if v.ok else 'NOT OK: ' + '; '.join(v.problems)}")
        if not all(v.ok for v in verdicts):
            raise typer.Exit(1)

    @netem.command("measure")
    def measure(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        count: int = typer.Option(10, "--count", "-c", **number_range(1, MAX_PINGS), help="Pings per pair."),
        tolerance_ms: float = typer.Option(2.0, "--tolerance-ms", **number_range(0, MAX_RTT_MS),
                                           help="Absolute error of the median RTT accepted per pair (ms)."),
        tolerance_pct: float = typer.Option(
            10.0, "--tolerance-pct", **number_range(0, MAX_TOLERANCE_PCT),
            help="Relative error accepted per pair (% of the configured RTT); the larger of the two tolerances applies."
        ),  # fmt: skip
        classes: bool = typer.Option(
            False, "--classes", help="Also ping each pair alone and check that the htb class for that peer "
            "counted the packets (kernel engine, works in structural mode too)."
        ),  # fmt: skip
        engine: str = typer.Option("auto", "--engine", help="Engine named in the report (auto: as apply picks it)."),
        at_s: float | None = typer.Option(None, "--at", **MAP_TIME, help="Judge against the map in force at this time "
                                          "(s); userspace: a pair its partitions and flaps hold down then must not "
                                          "answer."),
        json_out: Path | None = typer.Option(None, "--json", help="Write every pair's check as JSON here."),
        png_out: Path | None = typer.Option(None, "--png", help="Write configured vs measured RTT as a PNG here."),
    ) -> None:
        """Ping all pairs: configured vs measured RTT (median, p95), jitter and loss, pass/fail per pair; exit 1 on
        FAIL."""
        check_engine(engine)
        hosts, lmap = _load(inventory, map_path)
        lmap = lmap if at_s is None else lmap.at(at_s)
        remote = HostRemote()
        try:
            chosen = resolve(hosts, lmap, remote, Options(engine))[0]
            verdict = measure_pairs(hosts, lmap, remote, chosen, count, tolerance_ms, tolerance_pct, at_s=at_s)
            hits = NetemService(hosts, lmap, remote, "structural").check_classes() if classes else []
        finally:
            remote.close()
        typer.echo(format_validation(verdict))
        for h in hits:
            typer.echo(f"class {h.src:>10} -> {h.dst:<10} {h.classid:<6} +{h.delta} pkt (others max +{h.others_max}) "
                       f"{'ok' if h.ok else 'WRONG CLASS'}")  # fmt: skip
        if json_out is not None:
            medians: dict[str, dict[str, float | None]] = {n: {} for n in lmap.names}
            for p in verdict.pairs:
                medians[p.src][p.dst] = p.median_ms
            doc = {
                **verdict.to_dict(),
                "names": lmap.names,
                "requested_ms": {a: {b: lmap.rtt(a, b) for b in lmap.names if b != a} for a in lmap.names},
                "achieved_ms": medians,
                "classes_ok": all(h.ok for h in hits) if hits else None,
            }
            json_out.write_text(json.dumps(doc, indent=2))
        if png_out is not None:
            plot_validation(verdict, png_out)
        if not verdict.ok or not all(h.ok for h in hits):
            raise typer.Exit(1)
