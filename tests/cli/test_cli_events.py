"""`--events FILE` on `gesscale simulate` and `events:` in an experiment file (docs/events.md): the events reach
the simulator, and a bad entry is one line and exit 2 naming the entry and the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from gesscale.experiment.spec import scenario_of, spec_from_dict

MAP = {"nodes": ["a", "b", "c", "d"], "rtt_ms": {"a": {"b": 10, "c": 100, "d": 20}, "b": {"c": 90, "d": 20},
                                                   "c": {"d": 90}}}


def _scenario(tmp_path: Path) -> Path:
    data: dict[str, Any] = {
        "name": "t", "control_period_s": 10, "warmup_s": 0, "cluster": dict(MAP, max_replicas=4),
        "operator": {"alpha": 100, "beta": 1.0, "gamma": 0.5, "noise": 0.0, "reconfig_pause_s": 10,
                     "initial_replicas": 2},
        "workload": {"kind": "steps", "levels": [150, 150, 150], "step_s": 60},
    }
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def _events(tmp_path: Path, entries: list[dict[str, Any]]) -> Path:
    path = tmp_path / "ev.yaml"
    path.write_text(json.dumps({"events": entries}))
    return path


def test_simulate_applies_the_events_file(tmp_path: Path) -> None:
    sc = _scenario(tmp_path)
    out = tmp_path / "events.json"
    ev = _events(tmp_path, [{"t_s": 25, "node": "a", "add_rtt_ms": 200}])  # (b, a) degrades; (b, d) is 20 ms
    # An events file is not the operator's map: the controller sees the degradation by measuring it (two samples
    # of the median of 3: at 40, two periods after 25), and the latency-aware `static` moves a replica; so does
    # gesscale, whose scale-up asked for at 40 beside the degraded link becomes a move (gesscale/mape.py).
    argv = ["simulate", "-s", str(sc), "-p", "static,gesscale", "--events", str(ev), "--json", str(out)]
    assert main([*argv, "--latency-source", "measured"]) == 0
    doc = json.loads(out.read_text())
    assert doc["policies"]["static"]["moves"] == 1 and doc["policies"]["gesscale"]["moves"] == 1
    assert doc["network"]["latency_source"] == "measured"
    for pid in ("static", "gesscale"):
        changes = doc["network"]["changes"][pid][0]["changes"]
        assert {"t_s": 40.0, "pair": ["a", "b"], "old_ms": 10.0, "new_ms": 210.0} in changes
    assert main([*argv, "--latency-source", "map"]) == 0  # the map's view (the default): the degradation is unseen
    doc = json.loads(out.read_text())
    assert doc["policies"]["static"]["moves"] == doc["policies"]["gesscale"]["moves"] == 0 and "network" not in doc


@pytest.mark.parametrize(("entry", "message"), [
    ({"t_s": 5, "event": "crash", "node": "zz"}, "events[0] (crash at t_s 5): 'node' names unknown node 'zz'"),
    ({"t_s": 5, "event": "flap", "pair": ["a", "b"], "period_s": 10, "down_s": 20}, "'down_s' must be in (0, 10)"),
])
def test_a_bad_events_file_is_one_line_and_exit_2(tmp_path: Path, entry: dict[str, Any], message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "-s", str(_scenario(tmp_path)), "--events", str(_events(tmp_path, [entry]))])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1 and message in err


def test_an_experiment_takes_events_checked_against_its_map(tmp_path: Path) -> None:
    sc = _scenario(tmp_path)
    spec = spec_from_dict({"scenario": str(sc), "policies": ["gesscale"],
                           "events": [{"t_s": 30, "event": "crash", "node": "a", "duration_s": 60}]}, "x.yaml")
    assert [e.kind for e in scenario_of(spec).latency_map.events] == ["crash"]
    assert spec.resolved()["events"] == [{"t_s": 30, "event": "crash", "node": "a", "duration_s": 60}]
    bad = spec_from_dict({"scenario": str(sc), "policies": ["gesscale"],
                          "events": [{"t_s": 30, "event": "crash", "node": "q"}]}, "x.yaml")
    with pytest.raises(UserError, match=r"x.yaml: events\[0\] \(crash at t_s 30\): 'node' names unknown node 'q'"):
        scenario_of(bad)
    with pytest.raises(UserError, match="'events' must be a list"):
        spec_from_dict({"scenario": str(sc), "policies": ["gesscale"], "events": {"t_s": 1}}, "x.yaml")
    with pytest.raises(UserError, match="'events' is for environment: sim"):
        spec_from_dict({"environment": "local", "policies": ["gesscale"], "events": []}, "x.yaml")
