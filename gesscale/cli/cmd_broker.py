"""`gesscale broker up|down|status|check`: the local Kafka-compatible broker and mosquitto."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gesscale.cli.ranges import PORT, number_range

DEFAULT_DATA_DIR = Path("out/brokers")

broker_app = typer.Typer(
    help=(
        "Run the local brokers: an embedded Kafka-compatible broker (noida-db by default) and Debian's "
        "mosquitto. Everything else takes a bootstrap address, so a real Kafka is used by passing its address."
    ),
    no_args_is_help=True,
)

DATA_DIR_OPT = typer.Option(
    DEFAULT_DATA_DIR, "--data-dir", help="Folder for broker data, logs and the PID record (brokers.json)."
)


@broker_app.command("up")
def up(
    kafka_port: int = typer.Option(9092, "--kafka-port", **number_range(*PORT),
                                   help="Kafka listener port on 127.0.0.1."),
    mqtt_port: int = typer.Option(1883, "--mqtt-port", **number_range(*PORT), help="MQTT listener port on 127.0.0.1."),
    data_dir: Path = DATA_DIR_OPT,
    kafka_impl: str = typer.Option(
        "noida-db", "--kafka-impl", help="Kafka-compatible broker: noida-db (default, conformant) or tansu."
    ),
    kafka: bool = typer.Option(True, "--kafka/--no-kafka", help="Start the Kafka broker."),
    mqtt: bool = typer.Option(True, "--mqtt/--no-mqtt", help="Start mosquitto."),
    check: bool = typer.Option(
        True, "--check/--no-check", help="Run the conformance probes on the new Kafka and warn about failures."
    ),
) -> None:
    """Start the brokers in the background, wait until each answers, and record their PIDs."""
    from gesscale.brokers.manage import up as do_up

    out, err = Console(), Console(stderr=True)
    started, kept = do_up(data_dir, kafka_port if kafka else None, mqtt_port if mqtt else None, kafka_impl, check)
    for rec in kept:
        out.print(f"{rec.role}: already running ({rec.impl}, 127.0.0.1:{rec.port}, pid {rec.pid})")
    for rec in started:
        out.print(f"{rec.role}: started {rec.impl} on 127.0.0.1:{rec.port} (pid {rec.pid}, log {rec.log})")
        failed = [name for name, ok in rec.conformance.items() if not ok]
        if failed:
            err.print(
                f"[yellow]warning:[/yellow] {rec.impl} fails conformance probes: {', '.join(failed)}; "
                "figures that depend on them (lag from end offsets, time lookups) would be wrong with it"
            )
        elif rec.conformance:
            out.print(f"{rec.role}: all {len(rec.conformance)} conformance probes pass")


@broker_app.command("down")
def down(data_dir: Path = DATA_DIR_OPT) -> None:
    """Stop the brokers that `broker up` started (only those; data stays in the data dir)."""
    from gesscale.brokers.manage import down as do_down

    out = Console()
    result = do_down(data_dir)
    if not result:
        out.print(f"no brokers recorded in {data_dir}")
    for rec, was_running in result:
        out.print(f"{rec.role}: {'stopped' if was_running else 'was not running'} (pid {rec.pid})")


@broker_app.command("status")
def status(data_dir: Path = DATA_DIR_OPT) -> None:
    """Show the recorded brokers: running or not, answering on their port, failed conformance probes."""
    from gesscale.brokers.manage import status as do_status
    from gesscale.cli.tables import output_console, print_table

    rows = do_status(data_dir)
    out = output_console()
    if not rows:
        out.print(f"no brokers recorded in {data_dir}")
        return
    table = Table("role", "broker", "address", "pid", "state", "conformance")
    for row in rows:
        state = "up" if row.running and row.answering else ("starting" if row.running else "down")
        table.add_row(row.role, row.impl, row.address, str(row.pid), state, row.conformance)
    print_table(out, table)


@broker_app.command("check")
def check(
    bootstrap: str = typer.Option(..., "--bootstrap", "-b", help="Kafka bootstrap address host:port to probe."),
    kill_restart: bool = typer.Option(
        False, "--kill-restart", help="Also probe durability: kill -9 the broker 'broker up' recorded in --data-dir "
        "right after acknowledged writes, restart it, count what survived."),
    kill_restart_cmd: str | None = typer.Option(
        None, "--kill-restart-cmd", help="The same durability probe for any Kafka: a shell command that kills the "
        "broker with SIGKILL and starts it again (returns once it is started)."),
    data_dir: Path = DATA_DIR_OPT,
) -> None:
    """Run the conformance probes (tests/brokers) against any Kafka; exit 1 when one fails."""
    from gesscale.brokers.conformance import probe_acked_survive_kill, run_probes
    from gesscale.errors import UserError
    from gesscale.process import port_answers

    host, _, port = bootstrap.rpartition(":")
    if not port.isdigit() or not port_answers(int(port), host or "127.0.0.1", timeout_s=3):
        raise UserError(f"no broker answers at {bootstrap}")
    if kill_restart and kill_restart_cmd:
        raise UserError("give either --kill-restart or --kill-restart-cmd, not both")
    crash = _crash(kill_restart, kill_restart_cmd, data_dir, int(port))
    table = Table("probe", "result", "detail")
    results = run_probes(bootstrap)
    if crash is not None:
        results.append(probe_acked_survive_kill(bootstrap, crash))
    for r in results:
        table.add_row(r.name, "[green]ok[/green]" if r.ok else "[red]FAIL[/red]", r.detail)
    from gesscale.cli.tables import output_console, print_table

    print_table(output_console(), table)
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def _crash(recorded: bool, command: str | None, data_dir: Path, port: int):
    """The kill -9 and restart the durability probe uses, or None when neither option was given."""
    import subprocess

    from gesscale.brokers import state
    from gesscale.brokers.manage import kill_and_restart
    from gesscale.errors import UserError

    if command:
        def run_command() -> None:
            done = subprocess.run(command, shell=True, check=False)
            if done.returncode != 0:
                raise UserError(f"--kill-restart-cmd exited with {done.returncode}")

        return run_command
    if recorded:
        rec = state.load(data_dir.resolve()).get("kafka")
        if rec is None or rec.port != port or not rec.running():
            raise UserError(f"--kill-restart: no running Kafka on port {port} recorded in {data_dir} "
                            "(use --kill-restart-cmd for a broker 'broker up' did not start)")  # fmt: skip
        return lambda: kill_and_restart(data_dir)
    return None


def register(app: typer.Typer) -> None:
    """Add the `broker` command group."""
    app.add_typer(broker_app, name="broker")
