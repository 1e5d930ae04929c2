"""`gesscale simulate`: run policies on a scenario in the simulator and compare them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from gesscale.cli.controller_flags import controller_flags
from gesscale.cli.progress import run_progress
from gesscale.cli.ranges import SEEDS, number_range
from gesscale.errors import UserError
from gesscale.names import inside

DEFAULT_POLICIES = "gesscale,thr-nlunaware,thr-nlaware,mdl-nlunaware,ideal"


def print_policy_list(console: Console) -> None:
    """Every policy id with its one-line summary."""
    from gesscale.policies.base import describe_policies

    for pid, summary in describe_policies():
        console.print(f"  [cyan]{pid:<18}[/cyan] {summary}")


def _policies_help(value: str) -> str:
    """`--policies help`: list the policies and exit 0 before the other options are checked.

    The option is eager so that the listing the docs point to needs no --scenario.
    """
    if value.strip() == "help":
        from gesscale.cli.tables import output_console

        out = output_console()
        out.print("Policies:")
        print_policy_list(out)
        raise typer.Exit(0)
    return value


def register(app: typer.Typer) -> None:
    """Add the `simulate` command."""

    @app.command("simulate")
    @controller_flags("sim")
    def simulate(
        scenario: Path = typer.Option(
            ..., "--scenario", "-s", exists=True, help="Scenario YAML (see scenarios/ and docs/scenarios.md)."
        ),
        policies: str = typer.Option(
            DEFAULT_POLICIES, "--policies", "-p", is_eager=True, callback=_policies_help,
            help="Comma-separated policy ids, 'all', or 'help' to list them.",
        ),
        seeds: int = typer.Option(1, "--seeds", "-n", **number_range(*SEEDS),
                                   help="Runs per policy (seeds scenario.seed, +1, ...)."),
        json_out: Path | None = typer.Option(None, "--json", help="Write the medians as JSON (docs/metrics.md keys)."),
        plot: Path | None = typer.Option(
            None, "--plot", help="Folder for the Figure-7-style panel of every policy (first seed):"
            " <scenario>-figure7.png (also .svg, .pdf; with optimal and ideal, the table's references), and"
            " <scenario>-table3.md: the paper's Table III reproduction.",
        ),
        timeseries: Path | None = typer.Option(
            None, "--timeseries", help="Folder for per-period time series of each policy's first seed:"
            " <scenario>-<policy>.csv (input, throughput, backlog, replicas, ideal, ND_max, decision, reason).",
        ),
        model: Path | None = typer.Option(
            None, "--model", exists=True,
            help="Starting performance model (from `gesscale calibrate`) of the model-based policies (gesscale,"
                 " gesscale-plus, mdl-nlunaware: refitted at ND_max=0); an error when no requested policy has one.",
        ),
        events: Path | None = typer.Option(
            None, "--events", exists=True, dir_okay=False,
            help="Events file (docs/events.md): link changes, partitions, flaps, node crashes, leaves, joins and"
                 " churn, merged by time with the map's own changes: the simulator applies them, the controller"
                 " replaces lost replicas, moves off leaving nodes, and off degraded links when it measures them"
                 " (--latency-source measured|both: an events file is not the operator's map).",
        ),
        wide: bool = typer.Option(
            False, "--wide", help="Print the table at its full width; by default a table wider than the terminal"
            " (COLUMNS; 80 when piped) is stacked into parts that fit.",
        ),
        controller: dict[str, Any] | None = None,
        policy_option_args: list[str] | None = None,
    ) -> None:
        """Simulate autoscaling policies on a scenario and print the metrics table (medians over seeds).

        Metrics (docs/metrics.md): accuracy_O/U and timeshare_O/U against the ideal replica count, excess_time after
        the input stops, reconfigurations, cost in replica-minutes, SPEC instability and jitter, average
        replicas, peak backlog and p95 queueing delay.

        Controller options (--control-period, --warmup, --min-replicas, ...) replace the scenario's; policy
        options (--policy-option KEY=VALUE) those of its `policy_options:` section (`gesscale options`).
        """
        from gesscale.cli.outputs import check_output_dir, check_output_file
        from gesscale.cli.tables import output_console, print_table
        from gesscale.options import parse_policy_option_args
        from gesscale.policies.base import parse_policy_list
        from gesscale.report import metrics_table, simulate_json, write_json
        from gesscale.scenario import load_scenario, with_controller
        from gesscale.simulate import simulate_many, with_references

        out = output_console()
        err = Console(stderr=True)
        check_output_file(json_out, "--json")  # before the runs, not after them
        check_output_dir(plot, "--plot")
        check_output_dir(timeseries, "--timeseries")
        ids = parse_policy_list(policies)
        run_ids = with_references(ids)  # optimal and ideal always run: every row's regret is against them
        popts = parse_policy_option_args(policy_option_args or [], ids)
        sc = with_controller(load_scenario(scenario), controller or {})
        if events is not None:
            from gesscale.latency_map import read_events
            from gesscale.scenario import with_events

            sc = with_events(sc, read_events(events), str(events))
        for warning in sc.warnings:
            err.print(f"gesscale: warning: {sc.source}: {warning}", highlight=False, soft_wrap=True)
        extra: dict[str, object] = {}
        if model is not None:
            from gesscale.model_file import load_model_file
            from gesscale.policies.base import policy_ids
            from gesscale.simulate import takes_model

            users = [p for p in ids if takes_model(p)]
            if not users:
                known = ", ".join(p for p in policy_ids() if takes_model(p))
                raise UserError(f"--model: none of the policies {', '.join(ids)} has a performance model to start "
                                f"from (model-based: {known})")
            extra["initial_model"] = load_model_file(model)
            err.print(f"gesscale: {model} is the starting model of {', '.join(users)}", highlight=False)
        total = len(run_ids) * seeds
        with run_progress(err) as bar:
            task = bar.add_task(f"simulating {sc.name}", total=total)
            results = simulate_many(
                sc, run_ids, seeds, progress=lambda pid, seed: bar.advance(task),
                keep_history_first=plot is not None or timeseries is not None, policy_options=popts, **extra,
            )
        from gesscale.policies.optimal import summary_warnings

        for line in dict.fromkeys(w for r in results.get("optimal", []) for w in summary_warnings(r.model)):
            err.print(f"gesscale: warning: {sc.name}: {line}", highlight=False, soft_wrap=True)
        duration = next(iter(results.values()))[0].duration_s
        doc = simulate_json(sc.name, duration, results, requested=ids)
        title = f"{sc.name}: medians over {seeds} seed(s), {duration / 60:.0f} min of input"
        print_table(out, metrics_table(title, {**doc["policies"], **doc["references"]}, doc["regret"]), wide)
        out.print("c/opt, c/ideal: median over seeds of cost / the reference's cost on the same seed; "
                  "Δexcess: excess time minus optimal's; late: share of records held longer than 300 s; FAIL: a "
                  "backlog never drained (cost not comparable). optimal: cheapest schedule paying every pause, excess "
                  "<= 0, every record within 300 s.")
        if json_out is not None:
            try:
                write_json(json_out, doc)
            except OSError as ex:
                raise UserError(f"cannot write {json_out}: {ex.strerror}") from None
            out.print(f"wrote {json_out}")
        if plot is not None:  # the requested policies (the references run for the regret columns only)
            from gesscale.figures import paths_of
            from gesscale.report import figure7_runs, plot_figure7, workload_provenance

            path = plot_figure7(figure7_runs(results, ids), inside(plot, f"{sc.name}-figure7.png"),
                                caption=workload_provenance(sc.workload))
            for written in paths_of(path):
                out.print(f"wrote {written}")
            from gesscale.experiment.paper import reproduction_markdown

            table3 = reproduction_markdown(doc["policies"], workload_provenance(sc.workload), seeds)
            if table3:
                inside(plot, f"{sc.name}-table3.md").write_text(table3)
                out.print(f"wrote {plot / f'{sc.name}-table3.md'}")
        if timeseries is not None:
            from gesscale.report import write_csv
            from gesscale.simulate import TIMESERIES_COLUMNS, period_rows

            for pid in run_ids:
                path = write_csv(inside(timeseries, f"{sc.name}-{pid}.csv"), period_rows(results[pid][0]),
                                 TIMESERIES_COLUMNS)
                out.print(f"wrote {path}")
