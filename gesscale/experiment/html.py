"""The bundle's `report.html`: one self-contained page (figures embedded as data URIs, no external resource).

Sections: what ran (spec, workload provenance, environment), the metrics table (medians; FAIL marked), the
reproduction of the paper's Table III, the model's predictions against observations, the figures and the
bundle's files. Every table carries a `data-table` attribute and every figure an `img` with a data URI, so a
browser test can check both.
"""

from __future__ import annotations

import base64
import html
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gesscale.experiment.spec import ExperimentSpec

SHOWN = ("cost", "reconfigurations", "avg_replicas", "excess_time", "accuracy_u", "accuracy_o", "timeshare_u",
         "instability", "jitter", "max_backlog", "p95_delay_s")

_STYLE = """body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f2f2f2}.fail{color:#b00;font-weight:bold}
.ref{color:#666;font-style:italic}figure{margin:1em 0}img{max-width:100%}figcaption{font-size:.9em;color:#444}
code{background:#f4f4f4;padding:0 .2em}"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _num(key: str, v: float) -> str:
    if key in ("reconfigurations",):
        from gesscale.report import fmt_count

        return fmt_count(v)
    if key in ("cost", "max_backlog"):
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def metrics_table_html(doc: Mapping[str, Any]) -> str:
    """Policies (then the references, in grey) × the main metrics, with the regret status (FAIL in red)."""
    from gesscale.regret import failing, fmt_ratio, status
    from gesscale.report import TITLES

    head = "".join(f"<th>{_e(TITLES[k])}</th>" for k in SHOWN)
    rows = []
    for group, css in (("policies", ""), ("references", "ref")):
        for pid, m in doc[group].items():
            rg = doc["regret"].get(pid, {})
            st = status(rg) if rg else "–"
            cells = "".join(f"<td>{_num(k, m[k])}</td>" for k in SHOWN)
            rows.append(f'<tr class="{css}"><td>{_e(pid)}{" (reference)" if css else ""}</td>{cells}'
                        f"<td>{fmt_ratio(rg.get('cost_vs_optimal'))}</td>"
                        f'<td class="{"fail" if failing(rg) else ""}">{_e(st)}</td></tr>')
    return (f'<table data-table="metrics"><tr><th>policy</th>{head}<th>c/opt</th><th>status</th></tr>'
            + "".join(rows) + "</table>")


def markdown_table_html(md: str, name: str) -> str:
    """A simple Markdown table (header, rule, rows) as HTML; text after the table becomes a paragraph."""
    lines = [ln for ln in md.splitlines() if ln.strip()]
    table = [ln for ln in lines if ln.startswith("|")]
    rest = [ln for ln in lines if not ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in table if not set(ln) <= set("|-: ")]
    if not cells:
        return ""
    out = [f'<table data-table="{_e(name)}"><tr>' + "".join(f"<th>{_e(c)}</th>" for c in cells[0]) + "</tr>"]
    for row in cells[1:]:
        css = ' class="ref"' if row[0].startswith("paper (reference)") else ""
        out.append(f"<tr{css}>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</table>")
    out += [f"<p>{_e(p)}</p>" for p in rest]
    return "".join(out)


def model_table_html(decisions: Sequence[Mapping[str, Any]]) -> str:
    """Per model-based policy: how many saturated periods had a prediction, and the median and p90 of the
    absolute prediction error (%)."""
    errors: dict[str, list[float]] = {}
    for row in decisions:
        if row["error_pct"] != "":
            errors.setdefault(row["policy"], []).append(abs(float(row["error_pct"])))
    if not errors:
        return "<p>No policy with a performance model ran: no predictions to compare.</p>"
    rows = []
    for pid, errs in sorted(errors.items()):
        errs.sort()
        p90 = errs[min(len(errs) - 1, int(0.9 * len(errs)))]
        rows.append(f"<tr><td>{_e(pid)}</td><td>{len(errs)}</td><td>{statistics.median(errs):.1f}</td>"
                    f"<td>{p90:.1f}</td></tr>")
    return ('<table data-table="model"><tr><th>policy</th><th>predictions vs observed MST</th>'
            "<th>median |error| %</th><th>p90 |error| %</th></tr>" + "".join(rows) + "</table>")


def _figure(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{_e(path.name)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def bundle_files(out: Path, files: Sequence[Path]) -> list[str]:
    """The bundle's file list as the report shows it: exactly the files the run wrote (bundle-relative, once each),
    then `report.html` and `manifest.json` (written last)."""
    from gesscale.experiment.manifest import MANIFEST, relative

    names = sorted({relative(out, p) for p in files} - {"report.html", MANIFEST})
    return [*names, "report.html", MANIFEST]


def write_report(out: Path, spec: ExperimentSpec, doc: Mapping[str, Any], provenance: str,
                 figures: Sequence[Path], decisions: Sequence[Mapping[str, Any]], table3: str,
                 files: Sequence[Path] = ()) -> Path:
    """Write `out/report.html` from what the bundle holds; `files` are those the run wrote (listed, nothing
    else)."""
    env = json.loads((out / "environment.json").read_text())
    captions = {
        "figure7.png": "Every policy on one scale per row (first seed): input and throughput (1-min means), "
                       "replicas against the ideal count, backlog.",
        "model-vs-observed.png": "The MST the policy's model predicted for the configuration in force (before the "
                                 "period) against the throughput of saturated periods.",
    }
    git = env["git"]
    facts = (f"commit <code>{_e(git.get('commit'))}</code> ({_e(git.get('modified_files'))} modified files), "
             f"Python {_e(env['machine']['python'])}, {_e(env['machine']['system'])} "
             f"{_e(env['machine']['machine'])}, {_e(env['machine']['cpu_count'])} CPUs, "
             f"{_e(env['machine']['memory_mb'])} MB; created {_e(env['created_utc'])}")
    hashes = ", ".join(f"seed {s}: <code>{h[:16]}…</code>" for s, h in env["input"]["rate_sha256_by_seed"].items())
    files = bundle_files(out, files)
    parts = [
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{_e(spec.name)}</title>"
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Experiment {_e(spec.name)}</h1>",
        f"<p>Environment <b>{_e(spec.environment)}</b> (the simulator); scenario <code>{_e(doc['scenario'])}</code> "
        f"from <code>{_e(spec.scenario_path.name)}</code>; policies {_e(', '.join(spec.policies))}; "
        f"{spec.seeds} seed(s); {doc['duration_s'] / 60:.0f} min of input.</p>",
        f"<p><b>Workload:</b> {_e(provenance)}. Input SHA-256 per seed: {hashes}.</p>",
        f"<p><b>Produced by:</b> {facts}.</p>",
        "<h2>Metrics (medians over seeds)</h2>", metrics_table_html(doc),
        "<p>Metric definitions: docs/controller.md (jitter and instability per control period against the "
        "actionable demand; accuracy and timeshare against a demand that counts the backlog). FAIL: a backlog "
        "never drained; its cost is not comparable.</p>",
    ]
    if table3:
        parts += ["<h2>Reproduction of the paper's Table III</h2>", markdown_table_html(table3, "table3")]
    parts += ["<h2>Performance model: predicted against observed MST</h2>", model_table_html(decisions),
              "<h2>Figures</h2>"]
    parts += [_figure(p, f"{captions.get(p.name, p.name)} Workload: {provenance}.") for p in figures]
    parts += ["<h2>Files of this bundle</h2><ul>", *(f"<li><code>{_e(f)}</code></li>" for f in files),
              "</ul></body></html>"]
    path = out / "report.html"
    path.write_text("\n".join(parts))
    return path


def latency_table_html(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """Per live run: its day records' latency (p50, p95, p99, max; shares above the simulator's bound and the
    SLO) beside the same figures of the same policy in its simulated twin (docs/metrics.md, "Record latency")."""
    keys = ("records", "p50_s", "p95_s", "p99_s", "max_s", "over_bound_share", "over_slo_share")

    def cells(m: Mapping[str, Any] | None) -> str:
        m = m or {}
        return "".join(f"<td>{'–' if m.get(k) is None else _e(f'{100 * m[k]:.2f} %' if 'share' in k else m[k])}"
                       "</td>" for k in keys)

    rows, bounds = [], ""
    for pid, run in runs.items():
        live = run["live"].get("latency")
        twin = (run.get("twin_latency") or {}).get(pid)
        rows.append(f"<tr><td>{_e(pid)}</td><td>live ({_e((live or {}).get('basis', '–'))})</td>{cells(live)}</tr>")
        rows.append(f'<tr class="ref"><td>{_e(pid)}</td><td>simulated twin (FIFO)</td>{cells(twin)}</tr>')
        if live and not bounds:
            bounds = f"bound {live.get('bound_s')} s (the simulator's, optimal's), SLO {live.get('slo_s')} s"
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    return (f'<table data-table="latency"><tr><th>policy</th><th>from</th>{head}</tr>' + "".join(rows)
            + f"</table><p>Latency from a record's append to the input topic to its output's append (broker "
            f"timestamps; for an aggregating query the commit of the micro-batch that read it), the day's records "
            f"only; {_e(bounds)}.</p>")


def fidelity_table_html(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One table of every run's fidelity rows (`gesscale.fidelity`: live, twin, error, goal), or '' when no run
    has them (a bundle written before the twin was built from measurements)."""
    from gesscale.fidelity import table_cells

    body = []
    header: tuple[str, ...] = ()
    for rid, run in runs.items():
        rows = run.get("fidelity")
        if not rows:
            continue
        header, cells = table_cells(rows)
        body += [f"<tr><td>{_e(rid)}</td>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in cells]
    if not body:
        return ""
    return ('<table data-table="fidelity"><tr><th>run</th>' + "".join(f"<th>{_e(h)}</th>" for h in header)
            + "</tr>" + "".join(body) + "</table>")


def write_live_report(out: Path, spec: ExperimentSpec, runs: Mapping[str, Mapping[str, Any]], provenance: str,
                      figures: Sequence[Path], decisions: Sequence[Mapping[str, Any]],
                      stats: Mapping[str, Any] | None = None, plan: Mapping[str, Any] | None = None,
                      files: Sequence[Path] = ()) -> Path:
    """Write `out/report.html` of a live (`local`) bundle: the statistics over the repeats (median and interval per
    policy, block-paired comparisons), each run's accounting and reconfigurations, its simulated twin's comparison,
    the model's predictions, the figures, and exactly the files the run wrote."""
    from gesscale.experiment.repeats import stats_tables_html

    env = json.loads((out / "environment.json").read_text())
    keys = ("produced", "processed", "lost", "duplicated", "reconfigurations", "avg_replicas", "replica_minutes",
            "max_backlog")
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    rows = []
    for rid, run in runs.items():
        live = run["live"]
        cells = "".join(f"<td>{_e('–' if live.get(k) is None else _num(k, float(live[k])))}</td>" for k in keys)
        pauses = ", ".join(f"{p:.0f}" for p in live.get("pauses_s") or [] if p is not None) or "–"
        rows.append(f"<tr><td>{_e(rid)}</td><td>{_e(run.get('policy', rid))}</td><td>{_e(run.get('block', 1))}</td>"
                    f"{cells}<td>{_e(pauses)}</td></tr>")
    live_table = (f'<table data-table="live"><tr><th>run</th><th>policy</th><th>block</th>{head}'
                  "<th>measured pauses (s)</th></tr>" + "".join(rows) + "</table>")
    twins = []
    for rid, run in runs.items():
        sim = run.get("twin") or {}
        if not sim or run.get("block", 1) != 1:
            continue
        shown = ("cost", "reconfigurations", "avg_replicas", "excess_time", "max_backlog")
        trs = "".join(f"<tr><td>{_e(p)}</td>" + "".join(f"<td>{_num(k, m[k])}</td>" for k in shown) + "</tr>"
                      for p, m in sim.items())
        twins.append(f"<h3>Simulated twin of the {_e(rid)} run</h3><table data-table=\"twin-{_e(rid)}\"><tr>"
                     "<th>policy</th>" + "".join(f"<th>{k}</th>" for k in shown) + f"</tr>{trs}</table>")
    fidelity = fidelity_table_html(runs)
    git = env["git"]
    blocks = (plan or {}).get("blocks") or []
    order = "; ".join(f"block {i}: {', '.join(b)}" for i, b in enumerate(blocks, start=1))
    sized = (plan or {}).get("sized_by") or "–"
    parts = [
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{_e(spec.name)}</title>"
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Experiment {_e(spec.name)}</h1>",
        f"<p>Environment <b>local</b> (the fog-in-a-box testbed on this machine); policies "
        f"{_e(', '.join(spec.policies))}, {len(blocks)} block(s) of one run each, each run on a fresh testbed, the "
        f"order inside a block shuffled from seed {_e((plan or {}).get('order_seed'))} ({_e(order)}); options "
        f"<code>{_e(json.dumps(spec.local))}</code>.</p>",
        f"<p><b>Workload:</b> {_e(provenance)}; the same day in every run: "
        f"{_e((plan or {}).get('rides_per_day'))} rides per day, sized by {_e(sized)}.</p>",
        f"<p><b>Produced by:</b> commit <code>{_e(git.get('commit'))}</code> ({_e(git.get('modified_files'))} "
        f"modified files), {_e(env['machine']['cpu_count'])} CPUs, created {_e(env['created_utc'])}.</p>",
    ]
    if stats is not None:
        parts += ["<h2>Over the repeats</h2>", stats_tables_html(stats)]
    parts += [
        "<h2>Live runs</h2>", live_table,
        "<p>Records counted by unique keys at the job's output (docs/testbed.md).</p>",
        "<h3>End-to-end record latency, live and in the simulated twin</h3>", latency_table_html(runs),
        "<h2>Simulated twins (built from what each live run of the first block measured)</h2>", *twins,
        *(["<h2>Each run's policy on its twin against the run</h2>", fidelity] if fidelity else []),
        "<h2>Performance model: predicted against observed MST</h2>", model_table_html(decisions),
        "<h2>Figures</h2>",
        *(_figure(p, f"{p.stem}. Workload: {provenance}.") for p in figures),
        "<h2>Files of this bundle</h2><ul>",
        *(f"<li><code>{_e(f)}</code></li>" for f in bundle_files(out, files)),
        "</ul></body></html>",
    ]
    path = out / "report.html"
    path.write_text("\n".join(parts))
    return path
