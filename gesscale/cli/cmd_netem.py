"""`gesscale netem plan|probe|apply|clear|measure`: per-destination WAN latencies from a latency map."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from gesscale.errors import UserError
from netem.hosts import Host, hosts_for_map, load_inventory
from netem.latency_map import LatencyMap, load_latency_map
from netem.measure import format_verdict
from netem.plan import MODES, build_plan
from netem.playbooks import run_playbook
from netem.remote import FabricRemote
from netem.service import NetemService

VIAS = ("fabric", "ansible")

_INVENTORY_HELP = "Ansible inventory file or folder naming the hosts of the map, e.g. inventory/pi10."
_MAP_HELP = "Latency map YAML (nodes + rtt_ms), e.g. inventory/latency/pi10.yaml."
_MODE_HELP = (
    "netem: leaf `netem delay rtt/2` per destination. structural: the same htb/u32 tree with pfifo leaves, for "
    "kernels without netem (classification checked by class counters, no delay)."
)
_VIA_HELP = "fabric: gesscale's own parallel SSH. ansible: the netem role (playbooks/netem.yml). Same plan."


def _load(inventory: Path, map_path: Path) -> tuple[dict[str, Host], LatencyMap]:
    lmap = load_latency_map(map_path)
    hosts = hosts_for_map(load_inventory(inventory), lmap, str(inventory))
    return hosts, lmap


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
    ) -> None:
        """Print each node's tc plan (touches no host)."""
        _check_choice(mode, MODES, "--mode")
        hosts, lmap = _load(inventory, map_path)
        devices = {n: h.device or device for n, h in hosts.items()}
        plans = build_plan(lmap, {n: h.address or "" for n, h in hosts.items()}, devices, mode)
        for warning in lmap.warnings:
            typer.echo(f"warning: {warning}", err=True)
        for node, p in plans.items():
            typer.echo(p.apply_script() if script else p.describe())
            if not hosts[node].device:
                typer.echo(f"  (netem_device not set for {node}: shown as {device})")

    @netem.command("probe")
    def probe(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
    ) -> None:
        """Ask every host of the map whether its kernel has netem (changes nothing); exit 1 if one has not."""
        hosts, lmap = _load(inventory, map_path)
        remote = FabricRemote()
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
        mode: str = typer.Option("netem", "--mode", help=_MODE_HELP),
        via: str = typer.Option("fabric", "--via", help=_VIA_HELP),
    ) -> None:
        """Apply the plan on every host of the map (idempotent: delete, then add; same plan = no change).

        All inputs are checked first (map vs inventory, addresses, devices, netem on every host): on any
        problem no host is touched.
        """
        _check_choice(mode, MODES, "--mode")
        _check_choice(via, VIAS, "--via")
        hosts, lmap = _load(inventory, map_path)
        console = Console(highlight=False)
        if via == "ansible":
            _run_role(console, inventory, lmap, mode, "present")
            return
        remote = FabricRemote()
        try:
            changed = NetemService(hosts, lmap, remote, mode).apply()
        finally:
            remote.close()
        for node, did in changed.items():
            typer.echo(f"{node:<12} {'applied' if did else 'unchanged (plan already in place)'}")

    @netem.command("clear")
    def clear(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        via: str = typer.Option("fabric", "--via", help=_VIA_HELP),
    ) -> None:
        """Remove the tc tree from every host of the map (hosts without one are fine)."""
        _check_choice(via, VIAS, "--via")
        hosts, lmap = _load(inventory, map_path)
        if via == "ansible":
            _run_role(Console(highlight=False), inventory, lmap, "netem", "absent")
            return
        remote = FabricRemote()
        try:
            NetemService(hosts, lmap, remote).clear()
        finally:
            remote.close()
        typer.echo(f"cleared {len(hosts)} host(s)")

    @netem.command("measure")
    def measure(
        inventory: Path = typer.Option(..., "--inventory", "-i", help=_INVENTORY_HELP),
        map_path: Path = typer.Option(..., "--map", "-m", help=_MAP_HELP),
        count: int = typer.Option(5, "--count", "-c", min=1, help="Pings per pair."),
        tolerance_ms: float = typer.Option(2.0, "--tolerance-ms", min=0, help="Absolute error accepted per pair (ms)."),
        tolerance_pct: float = typer.Option(
            10.0, "--tolerance-pct", min=0, help="Relative error accepted per pair (% of the requested RTT); "
            "the larger of the two tolerances applies."
        ),  # fmt: skip
        classes: bool = typer.Option(
            False, "--classes", help="Also ping each pair alone and check that the htb class for that peer "
            "counted the packets (works in structural mode too)."
        ),  # fmt: skip
        json_out: Path | None = typer.Option(None, "--json", help="Write the matrix and verdict as JSON here."),
    ) -> None:
        """Ping all pairs and print achieved vs requested RTT, the error per pair, and a verdict; exit 1 on FAIL."""
        hosts, lmap = _load(inventory, map_path)
        remote = FabricRemote()
        try:
            service = NetemService(hosts, lmap, remote, "structural")
            verdict = service.measure(count, tolerance_ms, tolerance_pct)
            hits = service.check_classes() if classes else []
        finally:
            remote.close()
        typer.echo(format_verdict(verdict))
        for h in hits:
            typer.echo(f"class {h.src:>10} -> {h.dst:<10} {h.classid:<6} +{h.delta} pkt (others max +{h.others_max}) "
                       f"{'ok' if h.ok else 'WRONG CLASS'}")  # fmt: skip
        if json_out is not None:
            doc = {
                "names": lmap.names,
                "requested_ms": {a: {b: lmap.rtt(a, b) for b in lmap.names if b != a} for a in lmap.names},
                "achieved_ms": verdict.matrix(lmap.names),
                "ok": verdict.ok,
                "classes_ok": all(h.ok for h in hits) if hits else None,
            }
            json_out.write_text(json.dumps(doc, indent=2))
        if not verdict.ok or not all(h.ok for h in hits):
            raise typer.Exit(1)
