"""`gesscale job run`: the PySpark job (Kafka → a query, by default the nearest NYC landmark → Kafka or Parquet)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from gesscale.cli.query_option import query_option
from gesscale.cli.ranges import EXECUTORS, MAX_ROWS_PER_BATCH, PORT, YEAR_S, number_range
from gesscale.config import DAY_S
from gesscale.errors import UserError


def _conf(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--conf expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def register(app: typer.Typer) -> None:
    """Add the `job` command group."""
    job = typer.Typer(help="The PySpark streaming job: a query over taxi rides (nearest landmark, frequent routes, "
                           "or your own), exactly once.",
                      no_args_is_help=True)
    app.add_typer(job, name="job")

    @job.command("run")
    def run(
        bootstrap: str = typer.Option(..., "--bootstrap", help="Kafka bootstrap address, host:port."),
        output_bootstrap: str = typer.Option(None, "--output-bootstrap",
                                             help="Kafka of the output and dead-letter topics, host:port "
                                                  "[default: --bootstrap]."),
        input_topic: str = typer.Option("rides", "--input", help="Topic the rides are read from."),
        output: str = typer.Option("rides-enriched", "--output",
                                   help="Output topic (--sink kafka) or folder (--sink parquet)."),
        checkpoint: Path = typer.Option(..., "--checkpoint",
                                        help="Checkpoint folder: offsets and sink log; restart with the same one."),
        sink: str = typer.Option("kafka", "--sink", help="Where the query's output goes: kafka or parquet."),
        query: str = query_option(),
        dead_letter: str = typer.Option(None, "--dead-letter",
                                        help="Topic for records that do not parse [default: <input>-dead-letter]."),
        master: str = typer.Option("local[2]", "--master",
                                   help="Spark master: local[N] or spark://host:port (standalone)."),
        executors: int = typer.Option(None, "--executors", **number_range(*EXECUTORS),
                                      help="Initial executor target on a cluster master (ignored for local)."),
        max_rows_per_batch: int = typer.Option(50_000, "--max-rows-per-batch", **number_range(1, MAX_ROWS_PER_BATCH),
                                               help="Admission control: at most this many records per batch."),
        max_rows_per_range: int = typer.Option(100_000, "--max-rows-per-range", **number_range(1, MAX_ROWS_PER_BATCH),
                                               help="Split a partition's share of a batch into tasks of this size."),
        trigger_ms: int = typer.Option(0, "--trigger-ms", **number_range(0, int(DAY_S * 1000)),
                                       help="Micro-batch interval in ms; 0 starts the next batch at once."),
        starting_offsets: str = typer.Option("earliest", "--starting-offsets",
                                             help="Where a new query starts: earliest or latest."),
        metrics_jsonl: Path = typer.Option(None, "--metrics-jsonl",
                                           help="Append one observation per micro-batch to this JSON-lines file."),
        http_port: int = typer.Option(None, "--http-port", **number_range(*PORT),
                                      help="Serve /metrics, /observation and the scaling hook on this port."),
        http_host: str = typer.Option("127.0.0.1", "--http-host", help="Address the driver's HTTP API binds."),
        ui_port: int = typer.Option(14040, "--ui-port", **number_range(*PORT),
                                    help="Spark UI port (its REST API lists executors)."),
        driver_host: str = typer.Option(None, "--driver-host",
                                        help="Address executors use to reach the driver (cluster masters)."),
        bp_window_s: float = typer.Option(60.0, "--bp-window-s", **number_range(0, DAY_S, lo_open=True),
                                          help="Window over which bp_upstream counts held-back batches."),
        stop_when_idle_s: float = typer.Option(None, "--stop-when-idle-s", **number_range(0, YEAR_S),
                                               help="Stop once no record arrived for this long and no backlog."),
        available_now: bool = typer.Option(False, "--available-now",
                                           help="Process what the input holds at start, then stop."),
        conf: list[str] = typer.Option([], "--conf", help="Extra Spark setting KEY=VALUE (repeatable)."),
        wait_for_input: float = typer.Option(60.0, "--wait-for-input", **number_range(0, YEAR_S),
                                             help="When the input topic does not exist yet (a job started before its "
                                             "producer), wait this long (s) for it, saying so; 0 fails at once."),
    ) -> None:
        """Run the job until it stops (Ctrl-C or SIGTERM stop it cleanly; restart resumes)."""
        from jobs.job import JobConfig
        from jobs.job import run as run_job

        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("gesscale").setLevel(logging.INFO)
        cfg = JobConfig(
            bootstrap=bootstrap, input=input_topic, output=output, checkpoint=checkpoint, dead_letter=dead_letter,
            sink=sink, master=master, max_rows_per_batch=max_rows_per_batch, max_rows_per_range=max_rows_per_range,
            trigger_ms=trigger_ms, starting_offsets=starting_offsets, executors=executors,
            metrics_jsonl=metrics_jsonl, http_host=http_host, http_port=http_port, ui_port=ui_port,
            bp_window_s=bp_window_s, stop_when_idle_s=stop_when_idle_s, available_now=available_now,
            driver_host=driver_host, spark_conf=_conf(conf), output_bootstrap=output_bootstrap, query=query,
            input_wait_s=wait_for_input,
        )
        last = run_job(cfg)
        if last is not None:
            typer.echo(f"last batch {last['batch_id']}: backlog {last['backlog']}")
