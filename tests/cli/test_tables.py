"""Console tables fit the terminal (80 columns when piped, COLUMNS wins), stacked into parts that keep every
cell whole; --wide prints the one table; JSON keeps every column."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from gesscale.cli.tables import natural_width, output_width, print_table, stack
from gesscale.metrics import METRIC_KEYS
from gesscale.report import TITLES, _fmt
from tests.cli.test_cli import MAP, ROOT, scenario_text


def simulate(tmp_path: Path, columns: str | None, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "map.yaml").write_text(MAP)
    (tmp_path / "s.yaml").write_text(scenario_text())
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    r = subprocess.run([sys.executable, "-m", "gesscale", "simulate", "-s", str(tmp_path / "s.yaml"), "-n", "1",
                        "--json", str(tmp_path / "out.json"), *extra], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def cells_of(doc: dict) -> list[str]:
    """Every metric cell the table shows, as the table formats it."""
    rows = {**doc["policies"], **doc["references"]}
    return [_fmt(k, m[k]) for m in rows.values() for k in METRIC_KEYS]


def test_piped_table_is_80_columns_with_every_cell_whole(tmp_path: Path) -> None:
    r = simulate(tmp_path, None)
    lines = r.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "…" not in r.stdout
    assert all(TITLES[k] in r.stdout for k in METRIC_KEYS)
    cells = {c.strip() for line in lines if "│" in line for c in line.split("│")}
    assert set(cells_of(json.loads((tmp_path / "out.json").read_text()))) <= cells
    assert "(1/" in r.stdout  # stacked: the parts are numbered


def test_columns_wins_over_the_piped_width(tmp_path: Path) -> None:
    narrow = simulate(tmp_path, "60").stdout
    wide = simulate(tmp_path, "250").stdout
    assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 60
    assert "(1/" not in wide  # one table: 250 columns hold it
    assert max(len(line.rstrip()) for line in wide.splitlines()) > 80


def test_wide_prints_one_table_and_json_keeps_every_column(tmp_path: Path) -> None:
    r = simulate(tmp_path, "80", "--wide")
    header = next(line for line in r.stdout.splitlines() if "policy" in line and "┃" in line)
    assert all(TITLES[k] in header for k in METRIC_KEYS) and "c/opt" in header and "status" in header
    doc = json.loads((tmp_path / "out.json").read_text())
    assert all(set(m) == set(METRIC_KEYS) for m in doc["policies"].values())


def test_stack_keeps_the_key_column_and_every_cell() -> None:
    table = Table(title="t")
    table.add_column("key", no_wrap=True)
    for i in range(12):
        table.add_column(f"column {i}", justify="right")
    table.add_row("a-long-policy-id", *[f"{i * 1234567.891:,.3f}" for i in range(12)])
    parts = stack(table, 80)
    assert len(parts) > 1 and all(natural_width(p) <= 80 for p in parts)
    assert [c.header for p in parts for c in p.columns[1:]] == [f"column {i}" for i in range(12)]
    assert all(p.columns[0].header == "key" for p in parts)
    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    print_table(console, table)
    text = console.export_text()
    assert "…" not in text and all(f"{i * 1234567.891:,.3f}" in text for i in range(12))


def test_a_single_column_wider_than_the_console_wraps_instead_of_ending_in_an_ellipsis() -> None:
    table = Table()
    table.add_column("k", no_wrap=True)
    table.add_column("v")
    table.add_row("x", "y" * 120)
    console = Console(width=40, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    print_table(console, table)
    text = console.export_text()
    assert "…" not in text and text.count("y") == 120


def test_output_width(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "97")
    assert output_width() == 97
    monkeypatch.delenv("COLUMNS")
    assert output_width(open(os.devnull, "w")) == 80  # noqa: SIM115


def test_the_demo_report_fits_80_columns_and_keeps_the_whole_reason(capsys, monkeypatch) -> None:
    from gesscale.cli.cmd_demo import _print_report
    from gesscale.fidelity import fidelity_rows

    monkeypatch.delenv("COLUMNS", raising=False)
    reason = "back pressure on 3 periods: the model says n=3 sustains 412 records/s at ND_max 18.2 ms, 20 % above"
    medians = {p: {**dict.fromkeys(METRIC_KEYS, 1.5), "cost": 1234.0} for p in ("gesscale", "thr-nlaware")}
    _print_report({"produced": 10, "processed": 10, "lost": 0, "duplicated": 0, "dead_letters": 0,
                   "reconfigurations": [{"time_s": 30.0, "kind": "live", "added": ["fog4"], "removed": [],
                                         "nodes": ["fog1", "fog4"], "nd_max_ms": 18.2, "pause_s": 2.5,
                                         "reason": reason}],
                   "model": None, "timeline_png": "out/demo/timeline.png", "simulation": medians,
                   "timings_s": {"total": 1.0}, "options": {"policy": "gesscale"},
                   "twin": {"control_period_s": 3.048, "periods": 21, "mst_points": 2,
                            "by_kind": {"up": {"effective_s": 40.9, "pause_s": 7.262, "observation_gap_s": 45.947}},
                            "input": {"records": 48255, "seconds": 122}},
                   "fidelity": fidelity_rows({"reconfigurations": 3, "replica_minutes": 1234.5, "excess": 0.25,
                                              "p95_latency_s": 12.25},
                                             {"reconfigurations": 9, "replica_minutes": 1420.25, "excess": 0.5,
                                              "p95_latency_s": 180.5})})
    out = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80 and "…" not in out
    assert "gesscale: twin against the live run" in out and "effective after 40.9 s" in out
    assert " ".join(reason.split()) in " ".join(c.strip() for line in out.splitlines() if "│" in line
                                                for c in line.split("│")[-2:-1])


@pytest.mark.parametrize("form,formula", [
    ("paper", "500.0·n^0.80 − 2.000·ND_max"), ("per-replica", "500.0·n^0.80 − 2.000·n·ND_max"),
    ("proportional", "500.0·n^0.80·(1 − 0.00400·ND_max)"), ("per-batch", "1 / (1/(500.0·n^0.80) + 9e-6·ND_max)"),
])
def test_the_demo_report_titles_the_model_with_its_forms_formula(capsys, monkeypatch, form: str,
                                                                 formula: str) -> None:
    from gesscale.cli.cmd_demo import _print_report

    monkeypatch.setenv("COLUMNS", "200")
    latency = {"gamma": 0.0, "delta": 0.004} if form == "proportional" else {
        "gamma": 9.0 if form == "per-batch" else 2.0, "delta": 0.0}
    model = {"fitted": True, "alpha": 500.0, "beta": 0.8, **latency, "form": form, "form_reason": "as requested",
             "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 500.0, "predicted": 500.0}]}
    _print_report({"produced": 1, "processed": 1, "lost": 0, "duplicated": 0, "dead_letters": 0,
                   "reconfigurations": [], "model": model, "timings_s": {"total": 1.0}, "timeline_png": "t.png",
                   "simulation": {"gesscale": {**dict.fromkeys(METRIC_KEYS, 1.5), "cost": 1.0}},
                   "options": {"policy": "gesscale"}})
    assert f"model MST = {formula} vs measured" in " ".join(capsys.readouterr().out.split())
