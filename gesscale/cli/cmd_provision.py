"""`gesscale provision`: run the project's playbooks (site, reset, ...) against an inventory, live.

Secrets come by file (`--secrets-file`, or ansible-vault files in the inventory), never by `-e` (refused:
`netem.secrets`); host keys are learned once (`--learn-host-keys`, `netem.known_hosts`) and checked after.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from gesscale.errors import UserError
from netem.hosts import Host, load_inventory
from netem.playbooks import PLAYBOOKS, PlaybookResult, Progress, parse_extra_vars, run_playbook
from netem.secrets import check_secrets_file, refuse_secret_extras

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


def learn_host_keys(console: Console, hosts: dict[str, Host]) -> None:
    """Record each SSH host's keys in its known_hosts file (new hosts only) and print their fingerprints."""
    from netem.known_hosts import fingerprints, learn

    by_file: dict[str, dict[str, tuple[str, int]]] = {}
    for h in hosts.values():
        if not h.local and h.ssh_host and h.known_hosts:
            by_file.setdefault(h.known_hosts, {})[h.name] = (h.ssh_host, h.port)
    if not by_file:
        raise UserError("no SSH host in the inventory (every host is ansible_connection: local)")
    for path, targets in by_file.items():
        result = learn(targets, Path(path))
        for line in fingerprints(result.new_lines):
            console.print(f"  learned {line}", soft_wrap=True)
        console.print(f"{path}: {len(result.new_lines)} key(s) learned, {len(result.unchanged)} host(s) already "
                      "known with the same key", soft_wrap=True)
    console.print("compare each fingerprint with the host's own (on its console: "
                  "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub); SSH now refuses any other key")


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
        extra: list[str] = typer.Option(
            [], "--extra", "-e", help="Extra variable KEY=VALUE; repeat for more. Secret-looking names are refused."
        ),
        secrets_file: list[Path] = typer.Option(
            [], "--secrets-file",
            help="YAML file of secret variables (k3s_token, kafka_sasl_users, mqtt_users...), mode 0600 or "
                 "ansible-vault encrypted; passed to Ansible as -e @FILE. Repeat for more.",
        ),
        learn_host_keys_: bool = typer.Option(
            False, "--learn-host-keys",
            help="Scan each host's SSH key into the inventory's known_hosts (ssh_known_hosts_file) and stop. "
                 "New hosts only: a changed key is refused.",
        ),
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
        extra_vars = parse_extra_vars(extra)
        refuse_secret_extras(extra_vars)
        for path in secrets_file:
            check_secrets_file(path)
        if learn_host_keys_:
            learn_host_keys(console, hosts)
            return
        if plan:
            if check:
                raise UserError("--plan and --check: choose one (--plan contacts no host, --check runs on every host)")
            from netem.provision_plan import format_plan, provision_plan

            plans = provision_plan(playbook, inventory, tags=tags, skip_tags=skip_tags, limit=limit,
                                   extra_vars=extra_vars)  # fmt: skip
            console.print(f"provision plan: {playbook} on {len(plans)} host(s) of {inventory} (nothing contacted)",
                          soft_wrap=True)
            console.print(format_plan(plans), end="", soft_wrap=True, markup=False)
            return
        console.print(f"provision: {playbook} on {len(hosts)} host(s) of {inventory}")
        result = run_playbook(
            playbook, inventory, tags=tags, skip_tags=skip_tags, limit=limit, extra_vars=extra_vars,
            vault_password_file=vault_password_file, check=check, progress=live_progress(console),
            extra_vars_files=tuple(str(p) for p in secrets_file),
        )  # fmt: skip
        print_recap(console, result)
        if not result.ok:
            console.print(f"[bold red]provision failed[/] (ansible-playbook exit {result.rc})")
            raise typer.Exit(1)
        console.print(f"[green]provision done[/]: {result.changed} change(s)")
