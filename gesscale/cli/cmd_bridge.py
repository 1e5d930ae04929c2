"""`gesscale bridge`: forward MQTT topics into a Kafka topic, at least once."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import typer
from rich.console import Console

from gesscale.cli.ranges import MAX_PARTITIONS, MAX_RECORDS, MQTT_KEEPALIVE_S, YEAR_S, number_range
from gesscale.errors import UserError


def _host_port(text: str, what: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        raise UserError(f"{what} must be host:port, got {text!r}")
    return host or "127.0.0.1", int(port)


def register(app: typer.Typer) -> None:
    """Add the `bridge` command."""

    @app.command("bridge")
    def bridge(
        mqtt: str = typer.Option("127.0.0.1:1883", "--mqtt", help="MQTT broker host:port."),
        mqtt_topic: list[str] = typer.Option(
            ["rides"], "--mqtt-topic", help="MQTT topic filter to subscribe to (repeatable; wildcards allowed)."),
        kafka: str = typer.Option("127.0.0.1:9092", "--kafka", "-b", help="Kafka bootstrap address host:port."),
        topic: str = typer.Option("rides", "--topic", "-t", help="Kafka topic to write to (created if missing)."),
        partitions: int = typer.Option(8, "--partitions", **number_range(1, MAX_PARTITIONS),
                                       help="Partitions when the Kafka topic is created."),
        key_field: str = typer.Option(
            "ride_id", "--key-field", help="JSON field of the payload used as Kafka key ('' for no key)."),
        client_id: str = typer.Option(
            "gesscale-bridge", "--client-id",
            help="MQTT client id; keep it across restarts so the broker re-delivers what was not acknowledged."),
        idle_exit: float | None = typer.Option(
            None, "--idle-exit", **number_range(0, YEAR_S),
            help="Exit after this many seconds without new messages (default: until Ctrl-C)."),
        count: int | None = typer.Option(None, "--count", **number_range(1, MAX_RECORDS),
                                         help="Exit after forwarding this many messages."),
        json_out: Path | None = typer.Option(None, "--json", help="Write the final counters as JSON to this file."),
        keepalive: int = typer.Option(30, "--keepalive", **number_range(*MQTT_KEEPALIVE_S),
                                      help="MQTT keepalive in seconds."),
        give_up_after: float = typer.Option(
            120.0, "--give-up-after", **number_range(0, YEAR_S, lo_open=True),
            help="Seconds Kafka may keep failing before the bridge gives up (summary, exit 1; what it did not forward "
            "stays in the MQTT broker)."),
    ) -> None:
        """Forward MQTT messages to Kafka, at least once.

        QoS 1 on a persistent session; a message is acknowledged to MQTT only after Kafka acknowledged it.

        At the end the Kafka topic is read back and what this run forwarded but Kafka lost is re-sent.

        Prints counters every 5 s and a summary at the end (also on Ctrl-C and SIGTERM).
        """
        from gesscale.brokers.security import mqtt_security
        from gesscale.brokers.topics import ensure_topic
        from producer.bridge import Bridge

        err = Console(stderr=True) if Console(stderr=True).is_terminal else Console(stderr=True, width=120)
        from gesscale.cli.cmd_produce import verification_dict

        host, port = _host_port(mqtt, "--mqtt")
        ensure_topic(kafka, topic, partitions)
        runner = Bridge(host, port, mqtt_topic, kafka, topic, lambda m: err.print(f"[yellow]{m}[/yellow]"),
                        key_field=key_field or None, client_id=client_id, keepalive_s=keepalive,
                        mqtt_configure=mqtt_security().configure)  # fmt: skip
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        shown = {"at": 0.0}

        def progress(stats) -> None:
            if stats.elapsed_s - shown["at"] >= 5:
                shown["at"] = stats.elapsed_s
                err.print(f"received {stats.received}, forwarded {stats.forwarded}, "
                          f"Kafka failures {stats.kafka_failures}")  # fmt: skip

        try:
            stats = runner.run(stop, idle_exit_s=idle_exit, max_messages=count, progress=progress,
                               give_up_after_s=give_up_after)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        data = {
            "received": stats.received, "forwarded": stats.forwarded, "mqtt_acked": stats.mqtt_acked,
            "kafka_failures": stats.kafka_failures,
            "unforwarded": stats.received - stats.forwarded - stats.deduplicated,
            "redelivered": stats.redelivered, "deduplicated": stats.deduplicated, "pings": stats.pings,
            "elapsed_s": round(stats.elapsed_s, 2),
            "rate": round(stats.forwarded / stats.elapsed_s, 1) if stats.elapsed_s else 0.0,
            "gave_up": stats.gave_up,
            "verification": verification_dict(stats.verification, runner.pending() == 0),
        }  # fmt: skip
        v = data["verification"]
        verdict = (f"verified: {v['found']} of {v['expected']} forwarded records in Kafka by key, {v['lost']} lost, "
                   f"{v['duplicated']} duplicated, {v['restored']} re-sent after read-back" if v["verified"] else
                   f"NOT verified ({v.get('reason') or v.get('error') or str(v.get('lost')) + ' lost'})")  # fmt: skip
        (Console() if Console().is_terminal else Console(width=120)).print(
            f"bridge: received {data['received']}, forwarded to Kafka {data['forwarded']}, MQTT acknowledged "
            f"{data['mqtt_acked']}, Kafka failures retried {data['kafka_failures']}, {data['elapsed_s']} s; {verdict}"
            + (f"; {data['redelivered']} re-delivered by MQTT (an earlier bridge may have forwarded them: "
               "possible duplicates)" if data["redelivered"] else "")
            + (f"; {data['deduplicated']} received again and not forwarded twice" if data["deduplicated"] else "")
            + ("; gave up: Kafka stayed away" if data["gave_up"] else "")
        )
        if json_out is not None:
            json_out.write_text(json.dumps(data, indent=2) + "\n")
        if data["unforwarded"] or data["gave_up"] or not v["verified"]:
            raise typer.Exit(1)
