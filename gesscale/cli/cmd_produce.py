"""`gesscale produce`: replay the NYC taxi trace (or the synthetic one) into Kafka or MQTT."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from gesscale.cli.ranges import MAX_PARTITIONS, MAX_RECORDS, MQTT_KEEPALIVE_S, SEED, YEAR_S, number_range
from gesscale.workloads import MAX_RATE, workload_range


def _workload(key: str) -> dict[str, Any]:
    """The range of a number that a scenario's `workload:` also takes (`gesscale.workloads`): the same there."""
    lo, hi, lo_open, hi_open = workload_range(key)
    return number_range(lo, hi, lo_open=lo_open, hi_open=hi_open)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run the way Ctrl-C does (stop sending, deliver, verify, print the summary)."""

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def summary_dict(result) -> dict:
    """The run's figures as JSON-ready data (also what `--json` writes)."""
    s, src = result.stats, result.source
    return {
        "source": src.description,
        "destination": result.destination,
        "pacing": result.pacing,
        "rows_read": src.read,
        "skipped": dict(src.skipped),
        "skipped_total": sum(src.skipped.values()),
        "sent": s.sent,
        "acked": s.acked,
        "unacked": s.pending,
        "resent_after_failure": s.resent,
        "restored_after_verification": s.restored,
        "target_rate": round(s.target_rate, 1),
        "achieved_rate": round(s.achieved_rate, 1),
        "rate_error_pct": round(100 * s.rate_error, 2),
        "worst_lag_s": round(s.worst_lag_s, 3),
        "elapsed_s": round(s.elapsed_s, 2),
        "verify_s": round(s.verify_s, 2),
        "complete": s.drained and not s.interrupted and not s.gave_up,
        "gave_up": s.gave_up,
        "resumed_skipped": None if result.resumed is None else result.resumed.skipped,
        "interrupted": s.interrupted,
        "verification": verification_dict(s.verification, s.drained),
        "notes": s.notes,
    }


def verification_dict(v, drained: bool) -> dict:
    """The end verification as JSON-ready data: `verified` true only when the topic was read back and holds every
    record of the run; figures by unique key."""
    if v is None:
        why = "not drained: unacknowledged records remain" if not drained else "the destination cannot be read back"
        return {"verified": False, "reason": why}
    return {"verified": v.ok, "expected": v.expected, "found": v.found, "lost": v.lost,
            "duplicated": v.duplicated, "restored": v.restored, "read_backs": v.rounds, "error": v.error}


def exit_code(data: dict, unconfirmed_mqtt: bool) -> int:
    """0 only for a complete run whose records were verified in the topic (MQTT with --no-confirm: acknowledged by
    the broker, the bridge verifies Kafka); 130 when interrupted; 1 otherwise (gave up, unacknowledged, lost)."""
    if data["interrupted"]:
        return 130
    if not data["complete"]:
        return 1
    return 0 if unconfirmed_mqtt or data["verification"]["verified"] else 1


def print_summary(console: Console, data: dict) -> None:
    """The final summary: what was read, skipped by reason, sent, and how well the pace was kept."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("source", data["source"])
    table.add_row("destination", data["destination"])
    table.add_row("pacing", data["pacing"])
    table.add_row("rows read", str(data["rows_read"]))
    reasons = ", ".join(f"{k} {v}" for k, v in data["skipped"].items() if v) or "none"
    table.add_row("skipped", f"{data['skipped_total']} ({reasons})")
    table.add_row("sent / acknowledged", f"{data['sent']} / {data['acked']}" + (
        f"  [red]{data['unacked']} NOT acknowledged[/red]" if data["unacked"] else ""))  # fmt: skip
    if data["resent_after_failure"]:
        table.add_row("re-sent after failures", str(data["resent_after_failure"]))
    if data["restored_after_verification"]:
        table.add_row(
            "restored after an outage",
            f"{data['restored_after_verification']} (acknowledged by the broker but missing when read back; re-sent)",
        )
    if data["resumed_skipped"] is not None:
        table.add_row("resumed", f"{data['resumed_skipped']} records of the schedule already in the topic, skipped")
    table.add_row("verified", _verified_text(data["verification"]))
    err = data["rate_error_pct"]
    verdict = "[green]within 5 %[/green]" if abs(err) <= 5 else "[yellow]off by more than 5 %[/yellow]"
    table.add_row(
        "rate target / achieved",
        f"{data['target_rate']:.1f} / {data['achieved_rate']:.1f} records/s ({-err:+.2f} %, {verdict})",
    )
    table.add_row("worst lag behind schedule", f"{data['worst_lag_s']:.3f} s")
    table.add_row("elapsed", f"{data['elapsed_s']:.1f} s (then {data['verify_s']:.1f} s to verify)")
    console.print(table)


def _verified_text(v: dict) -> str:
    if "expected" not in v:
        return f"[yellow]no[/yellow] ({v['reason']})"
    figures = (f"{v['found']} of {v['expected']} records in the topic by key, {v['lost']} lost, "
               f"{v['duplicated']} duplicated, {v['restored']} re-sent after read-back")  # fmt: skip
    if v["verified"]:
        return f"[green]verified[/green]: {figures}"
    return f"[red]NOT verified[/red]: {figures}" + (f" ({v['error']})" if v["error"] else "")


def register(app: typer.Typer) -> None:
    """Add the `produce` command."""

    @app.command("produce")
    def produce(
        file: Path | None = typer.Argument(
            None, help="Taxi file: DEBS 2015 sorted_data.csv or trip_data_N.csv, plain or gzip. "
            "Without it, the synthetic diurnal trace (docs/scenarios.md) is generated."),
        fmt: str = typer.Option("auto", "--format", help="File format: auto, debs or trip_data."),
        speed: float = typer.Option(10.0, "--speed", **_workload("speed"),
                                    help="Replay speed-up over the trace's event time."),
        duplication: int = typer.Option(3, "--duplication", **_workload("duplication"),
                                        help="Records sent per ride (keys <ride>-0..N-1)."),
        pattern: str | None = typer.Option(
            None, "--pattern", help="Pace by a rate pattern instead of event time: 'cosine,mean=500,amplitude=300,"
            "period_s=600', 'steps,levels=1000:3000,step_s=60', taxi, random, ... or a scenario YAML."),
        rate: float | None = typer.Option(None, "--rate", **number_range(0, MAX_RATE, lo_open=True),
                                          help="Constant rate in records/s (needs --duration)."),
        duration: float | None = typer.Option(
            None, "--duration", **_workload("duration_s"),
            help="Seconds: the pattern's length, or stop an event-time replay after it."),
        seed: int = typer.Option(1, "--seed", **number_range(*SEED), help="Seed of the synthetic trace and of pattern "
                                 "noise."),
        days: float = typer.Option(2.0, "--days", **_workload("days"), help="Synthetic trace length in trace days."),
        rides_per_day: int = typer.Option(500_000, "--rides-per-day", **_workload("rides_per_day"),
                                          help="Synthetic trace rides per day."),
        limit: int | None = typer.Option(None, "--limit", **number_range(1, MAX_RECORDS),
                                         help="Stop after this many records."),
        kafka: str = typer.Option("127.0.0.1:9092", "--kafka", "-b", help="Kafka bootstrap address host:port."),
        topic: str = typer.Option("rides", "--topic", "-t", help="Kafka topic (created if missing)."),
        partitions: int = typer.Option(8, "--partitions", **number_range(1, MAX_PARTITIONS),
                                       help="Partitions when the topic is created."),
        mqtt: str | None = typer.Option(None, "--mqtt", help="Publish to this MQTT broker host:port instead."),
        mqtt_topic: str = typer.Option("rides", "--mqtt-topic", help="MQTT topic to publish to."),
        qos: int = typer.Option(1, "--qos", **number_range(0, 1), help="MQTT QoS: 0 or 1."),
        client_id: str | None = typer.Option(
            None, "--client-id", help="MQTT client id (default: derived from the run's options, so that a restarted "
            "or --resume'd run resumes its session and outbox)."),
        outbox: Path | None = typer.Option(
            None, "--outbox", help="MQTT: the durable outbox file (default out/mqtt-outbox/<client id>.sqlite)."),
        confirm: bool = typer.Option(
            True, "--confirm/--no-confirm", help="MQTT QoS 1: wait for a bridge, keep every record in the outbox until "
            "it is found in the Kafka topic (-b, -t) by key, publish again what is missing."),
        keepalive: int = typer.Option(30, "--keepalive", **number_range(*MQTT_KEEPALIVE_S),
                                      help="MQTT keepalive in seconds."),
        give_up_after: float = typer.Option(
            120.0, "--give-up-after", **number_range(0, YEAR_S, lo_open=True),
            help="Seconds the broker may stay unreachable before the run gives up (summary, exit 1)."),
        resume: bool = typer.Option(
            False, "--resume", help="Continue a killed run (same options): records whose key the topic already "
            "holds are skipped, the rest sent from now on."),
        json_out: Path | None = typer.Option(None, "--json", help="Also write the summary as JSON to this file."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ) -> None:
        """Replay taxi rides as JSON records (key <ride_id>-<dup>, event time) into Kafka or MQTT.

        Pacing: the trace's event time (x --speed), or a rate pattern shared with the simulator.

        Rows with zero or out-of-NYC coordinates, non-positive durations or that do not parse are counted.

        A broker outage is retried with backoff, then the topic is read back: nothing is lost.

        The summary: sent, skipped by reason, target vs achieved rate, worst lag behind schedule.
        """
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from producer.run import ProduceOptions, prepare

        err = Console(stderr=True)
        if file is not None:  # /dev/zero or a FIFO as the trace would be read forever
            from gesscale.inputfile import check_regular

            check_regular(file, "taxi file")
        opts = ProduceOptions(
            file=file, fmt=fmt, speed=speed, duplication=duplication, pattern=pattern, rate=rate,
            duration_s=duration, seed=seed, days=days, rides_per_day=rides_per_day, limit=limit, kafka=kafka,
            topic=topic, partitions=partitions, mqtt=mqtt, mqtt_topic=mqtt_topic, qos=qos,
            give_up_after_s=give_up_after, resume=resume, client_id=client_id, outbox=outbox, confirm=confirm,
            keepalive_s=keepalive,
        )  # fmt: skip
        say = {"print": err.print}  # above the progress bar once it is shown

        def notify(message: str) -> None:
            say["print"](f"[yellow]{message}[/yellow]")

        run = prepare(opts, notify)  # user mistakes end here, before any progress bar
        with Progress(
            TextColumn("[cyan]producing[/cyan]"),
            BarColumn(),
            TextColumn("{task.fields[sent]} sent, {task.fields[acked]} acked"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("lag {task.fields[lag]}"),
            TimeElapsedColumn(),
            console=err,
            disable=quiet,
            transient=False,
        ) as bar:
            task = bar.add_task("produce", total=None, sent=0, acked=0, rate="", lag="0.000 s")
            say["print"] = bar.console.print

            def show(stats) -> None:
                rate_now = f"{stats.sent / stats.elapsed_s:,.0f}/s" if stats.elapsed_s > 0 else ""
                bar.update(task, total=stats.planned, completed=stats.sent, sent=stats.sent, acked=stats.acked,
                           rate=rate_now, lag=f"{stats.worst_lag_s:.3f} s")  # fmt: skip

            with sigterm_as_interrupt():
                result = run.run(show)
        data = summary_dict(result)
        out = Console() if Console().is_terminal else Console(width=120)
        print_summary(out, data)
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(data, indent=2) + "\n")
        code = exit_code(data, mqtt is not None and not (confirm and qos == 1))
        if code == 1:
            v = data["verification"]
            why = ("gave up: the broker stayed away" if data["gave_up"] else
                   f"{data['unacked']} records were not acknowledged" if data["unacked"] else
                   f"{v.get('lost', '?')} acknowledged records are missing from the topic")  # fmt: skip
            err.print(f"[red]{why}[/red]")
        if code:
            raise typer.Exit(code)
