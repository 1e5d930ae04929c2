"""`gesscale provision`: run the project's playbooks (site, reset, ...) against an inventory, live."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from gesscale.errors import UserError
from netem.hosts import load_inventory
from netem.playbooks import PLAYBOOKS, PlaybookResult, Progress, parse_extra_vars, run_playbook

_STYLE = {"ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "bold red", "skipped": "dim"}


def live_progress(console: Console) -> Progress:
    """A progress callback that prints each play, task and host result as it happens."""

    def show(kind: str, host: str, text: str) -> None:
        if kind == "play":
            console.print(f"[bold]PLAY[/] {text}")
        elif kind == "task":
            console.print(f"  [cyan]TASK[/] {text}")
        else:
            extra = f" — {text}" if text else ""
            console.print(f"    [{_STYLE.get(kind, '')}]{kind:<11}[/] {host}{extra}", highlight=False)

    return show


def print_recap(console: Console, result: PlaybookResult) -> None:
    """The PLAY RECAP as a compact table, then the failures, if any."""
    console.print("[bold]RECAP[/]")
    for host, r in sorted(result.recap.items()):
        console.print(
            f"  {host:<16} ok={r.ok:<4} changed={r.changed:<4} failed={r.failed:<3} "
            f"unreachable={r.unreachable:<3} skipped={r.skipped}",
            highlight=False,
        )
    for line in result.failures:
        console.print(f"  [red]{line}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the `provision` command."""

    @app.command("provision")
    def provision(
        inventory: Path = typer.Option(
            ..., "--inventory", "-i", help="Ansible inventory file or folder, e.g. inventory/pi10."
        ),
        playbook: str = typer.Option(
            "site", "--playbook", "-p",
            help=f"Playbook to run: {', '.join(PLAYBOOKS)} (from playbooks/) or a path to another playbook.",
        ),
        tags: str | None = typer.Option(
            None, "--tags", "-t", help="Only these tags, comma-separated: prereq, raspberrypi, k3s, kafka, mqtt, spark."
        ),
        skip_tags: str | None = typer.Option(None, "--skip-tags", help="Skip these tags, comma-separated."),
        limit: str | None = typer.Option(None, "--limit", "-l", help="Only these hosts or groups (Ansible pattern)."),
        extra: list[str] = typer.Option([], "--extra", "-e", help="Extra variable KEY=VALUE; repeat for more."),
        vault_password_file: str | None = typer.Option(
            None, "--vault-password-file", help="File holding the ansible-vault password for encrypted vars."
        ),
        check: bool = typer.Option(False, "--check", help="Dry run: report what would change, change nothing."),
        plan: bool = typer.Option(
            False, "--plan",
            help="List per host what the playbook would do, from the inventory and the roles' variables only: no SSH.",
        ),
    ) -> None:
        """Provision a cluster from an inventory: prerequisites, k3s, Kafka, MQTT, Spark RBAC (playbooks/site.yml).

        Runs through ansible-runner and prints every task and host result as it happens; exits 1 when a task
        failed or a host was unreachable.
        """
        console = Console(highlight=False)
        hosts = load_inventory(inventory)  # parse errors are reported before anything runs
        if plan:
            if check:
                raise UserError("--plan and --check: choose one (--plan contacts no host, --check runs on every host)")
            from netem.provision_plan import format_plan, provision_plan

            plans = provision_plan(playbook, inventory, tags=tags, skip_tags=skip_tags, limit=limit,
                                   extra_vars=parse_extra_vars(extra))  # fmt: skip
            console.print(f"provision plan: {playbook} on {len(plans)} host(s) of {inventory} (nothing contacted)",
                          soft_wrap=True)
            console.print(format_plan(plans), end="", soft_wrap=True, markup=False)
            return
        console.print(f"provision: {playbook} on {len(hosts)} host(s) of {inventory}")
        result = run_playbook(
            playbook, inventory, tags=tags, skip_tags=skip_tags, limit=limit, extra_vars=parse_extra_vars(extra),
            vault_password_file=vault_password_file, check=check, progress=live_progress(console),
        )  # fmt: skip
        print_recap(console, result)
        if not result.ok:
            console.print(f"[bold red]provision failed[/] (ansible-playbook exit {result.rc})")
            raise typer.Exit(1)
        console.print(f"[green]provision done[/]: {result.changed} change(s)")
