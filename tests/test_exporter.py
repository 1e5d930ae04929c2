"""The one Prometheus exporter of live runs (`gesscale/exporter.py`): what each metric shows, and that every name,
type and label is in docs/controller.md's table."""

from __future__ import annotations

import re
import urllib.request

import pytest

from gesscale.errors import UserError
from gesscale.exporter import ControllerMetrics
from gesscale.mape import StepRecord
from gesscale.observation import Decision, Reconfiguration
from tests.fixtures.paths import ROOT
from tests.helpers import LMAP, obs


def _record(applied: bool, replicas: tuple[str, ...] = ("n1", "n2")) -> StepRecord:
    nodes = (*replicas, "n3")
    rec = Reconfiguration(time_s=600.0, kind="up", added=("n3",), removed=(), nodes=nodes,
                          nd_max_ms=LMAP.nd_max(nodes), pause_s=3.5 if applied else 0.0, reason="more")
    return StepRecord(obs(replicas, input_rate=120.0, throughput=90.0, backlog=40.0, bp_up=0.6),
                      Decision(3, "more"), rec, applied)


def test_an_applied_reconfiguration_moves_the_replicas_in_use() -> None:
    m = ControllerMetrics()
    m.on_step(_record(applied=True), {"alpha": 60.0, "beta": 0.9, "gamma": 0.1, "measurements": 4})
    text = m.text()
    for line in ("gesscale_replicas 3.0", "gesscale_recommended_replicas 3.0", 'gesscale_replica_node{node="n3"} 1.0',
                 f"gesscale_nd_max_ms {LMAP.nd_max(('n1', 'n2', 'n3'))}", "gesscale_input_rate 120.0",
                 "gesscale_throughput 90.0", "gesscale_backlog 40.0", "gesscale_bp_upstream 0.6",
                 "gesscale_cpu_utilisation 0.7", 'gesscale_model_param{param="beta"} 0.9',
                 "gesscale_model_measurements 4.0", 'gesscale_reconfigurations_total{kind="up"} 1.0',
                 'gesscale_decisions_total{applied="true",kind="up"} 1.0', "gesscale_last_pause_seconds 3.5",
                 "gesscale_control_periods_total 1.0"):
        assert line in text, line


def test_a_recommendation_only_moves_the_recommended_metrics() -> None:
    m = ControllerMetrics()
    m.on_step(_record(applied=False))
    text = m.text()
    assert "gesscale_replicas 2.0" in text and "gesscale_recommended_replicas 3.0" in text
    assert 'gesscale_replica_node{node="n3"}' not in text and 'gesscale_recommended_node{node="n3"} 1.0' in text
    assert f"gesscale_nd_max_ms {LMAP.nd_max(('n1', 'n2'))}" in text
    assert 'gesscale_decisions_total{applied="false",kind="up"} 1.0' in text
    assert 'gesscale_reconfigurations_total{kind="up"}' not in text
    assert "gesscale_model_param{" not in text  # a policy without a model


def test_no_change_counts_a_decision_of_kind_none_and_nodes_follow_the_run() -> None:
    m = ControllerMetrics()
    m.on_step(_record(applied=True))
    m.on_step(StepRecord(obs(("n1",)), Decision(1, "hold"), None, False))
    text = m.text()
    assert 'gesscale_decisions_total{applied="false",kind="none"} 1.0' in text
    assert 'gesscale_replica_node{node="n2"}' not in text and "gesscale_replicas 1.0" in text
    assert "gesscale_control_periods_total 2.0" in text


def _documented() -> dict[str, tuple[str, str]]:
    """name -> (type, labels cell) from docs/controller.md's table of live metrics."""
    text = (ROOT / "docs" / "controller.md").read_text()
    rows = re.findall(r"^\| `(gesscale_[a-z_]+)` \| (gauge|counter) \|([^|]*)\|", text, flags=re.M)
    return {name: (kind, labels) for name, kind, labels in rows}


def test_every_exported_metric_is_documented_with_its_type_and_labels() -> None:
    m = ControllerMetrics()
    m.on_step(_record(applied=True), {"alpha": 1.0, "beta": 1.0, "gamma": 0.0, "measurements": 1})
    docs = _documented()
    exported = set()
    for family in m.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        exported.add(name)
        assert name in docs, f"{name} is not in docs/controller.md"
        kind, labels = docs[name]
        assert kind == family.type, name
        used = {label for sample in family.samples for label in sample.labels}
        names = set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", labels)))  # values are in parentheses
        assert used == names, (name, used, labels)
    assert exported == set(docs), set(docs) - exported


def test_serves_metrics_over_http_and_a_taken_port_is_a_user_error() -> None:
    m = ControllerMetrics()
    m.serve(0)
    try:
        port = m._server.server_port
        m.on_step(_record(applied=True))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert "gesscale_replicas 3.0" in resp.read().decode()
        with pytest.raises(UserError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            ControllerMetrics().serve(port)
    finally:
        m.close()

