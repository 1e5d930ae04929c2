"""Pure parts of the testbed: durations, pause measurement, batch log reading, the demo's workload and the
ground truth of a run's simulated twin (its MST points; the rest of the twin: tests/test_twin.py)."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest

from gesscale.batch_record import BatchRecord, BatchRecordError
from gesscale.errors import UserError
from gesscale.latency_map import load_latency_map
from gesscale.placement import starting_nodes
from gesscale.scenario import scenario_from_dict
from gesscale.testbed.backend import first_batch_started_after, longest_gap
from gesscale.testbed.controller import parse_duration, read_reconfigurations
from gesscale.testbed.demo import DemoOptions
from gesscale.testbed.fleet import node_host
from gesscale.testbed.job import read_batches
from gesscale.twin import build_twin, relative_noise
from gesscale.workloads import rate_profile
from producer.pattern import parse_pattern

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("10", 10), ("1.5m", 90), ("2h", 7200), ("500ms", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ten", "5 days", "-3s", "0s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UserError):
        parse_duration(text)


def test_longest_gap_spans_the_change() -> None:
    # batches every 2 s, a change from t=10 to t=12, the next batch only at 19
    times = [2, 4, 6, 8, 19, 21]
    assert longest_gap(times, 10, 12) == pytest.approx(11)  # 8 -> 19
    # a batch completed during the change splits the gap
    assert longest_gap([2, 8, 11, 19], 10, 12) == pytest.approx(8)  # 11 -> 19
    # no batch before: the gap starts at the change
    assert longest_gap([15], 10, 12) == pytest.approx(5)


def test_the_change_is_effective_when_a_batch_started_after_it_completed() -> None:
    # The demo's first live scale-up: batch 9 was running when the executor registered (t=78) and finished on
    # the old executor; batch 10 started after it and waited 45.7 s for the new executor's cold start.
    batches = [BatchRecord(time=t, batch_id=i, num_input_rows=1000, batch_duration_ms=d)
               for i, (t, d) in enumerate([(68.7, 9881), (78.4, 9763), (124.1, 45669), (133.1, 8992)])]
    settled = first_batch_started_after(batches, 78.0)
    assert settled == pytest.approx(124.1)
    assert longest_gap([b.time for b in batches], 70.0, settled) == pytest.approx(45.7)
    assert first_batch_started_after(batches, 124.0) == pytest.approx(133.1)
    assert first_batch_started_after(batches, 130.0) is None


def test_read_batches_ignores_a_partial_last_line(tmp_path: Path) -> None:
    p = tmp_path / "b.jsonl"
    rest = '"time": 1.0, "num_input_rows": 5, "batch_duration_ms": 100}'
    p.write_text(f'{{"batch_id": 0, {rest}\n{{"batch_id": 1, {rest}\n{{"batch_')
    got, off = read_batches(p)
    assert [b.batch_id for b in got] == [0, 1]
    with p.open("a") as fh:
        fh.write(f'id": 2, {rest}\n')
    more, off2 = read_batches(p, off)
    assert [b.batch_id for b in more] == [2]
    assert off2 == p.stat().st_size
    assert read_batches(tmp_path / "missing.jsonl", 5) == ([], 5)


def test_read_batches_names_the_file_of_a_line_that_is_no_batch_record(tmp_path: Path) -> None:
    p = tmp_path / "b.jsonl"
    p.write_text('not json\n{"batch_id": 0, "time": 1.0}\n')  # a torn line is skipped, a wrong record is not
    with pytest.raises(BatchRecordError, match=r"b\.jsonl: batch record lacks 'num_input_rows', 'batch_duration_ms'"):
        read_batches(p)


def test_read_reconfigurations_skips_garbage(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    p.write_text('{"kind": "up"}\nnot json\n{"kind": "down"}\n')
    assert [r["kind"] for r in read_reconfigurations(p)] == ["up", "down"]
    assert read_reconfigurations(tmp_path / "none") == []


def test_node_addresses() -> None:
    assert node_host("fog1", 0) == "127.0.0.31"
    assert node_host("fog9", 8) == "127.0.0.39"
    assert node_host("edge-a", 2) == "127.0.0.33"


def test_demo_pattern_is_the_workload_the_simulator_replays() -> None:
    opts = DemoOptions(day_s=120, rides_per_day=20_000, start_hour=4)
    spec = parse_pattern(opts.pattern())
    assert spec == opts.workload()
    profile = rate_profile(spec, seed=1)
    assert len(profile) == 120
    # the compressed day starts in the night trough and peaks in the evening
    assert profile[:10].mean() < profile.max() / 3


@pytest.mark.parametrize(("day_s", "node_rate", "peak_load"), [(120, 1064.0, 2.0), (120, 400.0, 1.5),
                                                                 (600, 900.0, 2.0)])
def test_demo_day_is_sized_so_its_peak_is_the_asked_multiple_of_one_node(day_s: float, node_rate: float,
                                                                         peak_load: float) -> None:
    opts = DemoOptions(day_s=day_s, peak_load=peak_load)
    opts.rides_per_day = opts.size_day(node_rate)
    assert opts.peak_rate() == pytest.approx(peak_load * node_rate, rel=1e-3)
    # the profile the producer replays (Poisson around the hourly shape) peaks there too
    profile = rate_profile(parse_pattern(opts.pattern()), seed=1)
    hour_s = int(day_s / 24)
    peak_hour = max(profile[i:i + hour_s].mean() for i in range(0, len(profile) - hour_s + 1, hour_s))
    assert peak_hour == pytest.approx(peak_load * node_rate, rel=0.1)


def test_demo_hours_replay_that_stretch_of_the_same_day() -> None:
    whole = DemoOptions(day_s=720, rides_per_day=40_000, start_hour=8)
    part = DemoOptions(day_s=720, rides_per_day=40_000, start_hour=8, hours=10)
    spec = parse_pattern(part.pattern())
    assert spec == part.workload()
    profile = rate_profile(spec, seed=1)
    assert len(profile) == part.replay_s == 300  # hours 8-18 of a 720-s day
    day = rate_profile(parse_pattern(whole.pattern()), seed=1)
    assert len(day) == whole.replay_s == 720
    # the same hours at the same rates: the first 300 s of the whole day, up to the Poisson draws
    assert profile.sum() == pytest.approx(day[:300].sum(), rel=0.05)
    assert part.peak_rate() == whole.peak_rate()  # sized by the day's peak either way


def test_demo_volume_is_unknown_until_sized() -> None:
    with pytest.raises(ValueError):
        DemoOptions().workload()


@pytest.mark.parametrize(("field", "value"), [("nodes", 10), ("node_cpu", 0), ("node_cpu", 1.5), ("day_s", 5),
                                              ("start_hour", 24), ("peak_load", 0.5), ("rides_per_day", 10),
                                              ("probe_s", 1), ("hours", 0.5), ("hours", 25)])
def test_demo_options_reject(field: str, value: float) -> None:
    with pytest.raises(UserError):
        DemoOptions(**{field: value}).validate()


TIMED = [{"kind": "up", "started_s": 10.0, "effective_s": 20.0, "pause_s": 4.0},
         {"kind": "up", "started_s": 50.0, "effective_s": 60.0, "pause_s": 6.0}]


def test_the_twins_operator_is_the_runs_mst_points() -> None:
    lmap = load_latency_map(ROOT / "inventory" / "latency" / "fog9.yaml").subset(["fog1", "fog2", "fog3"])
    model = {"fitted": True, "alpha": 150.0, "beta": 0.8, "gamma": 0.5,
             "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 140.0, "predicted": 150.0},
                              {"n": 2, "nd_max_ms": 9.0, "mst": 270.0, "predicted": 256.7}]}
    doc, _ = build_twin([], TIMED, model, lmap.to_dict(), 3, 20.0, 10.0)
    sc = scenario_from_dict(doc, "test")
    assert sc.truth.alpha == 150.0 and sc.truth.beta == 0.8 and sc.truth.gamma == 0.5
    assert sc.truth.reconfig_pause_s == pytest.approx(5.0)
    assert sc.truth.timing("up").effective_s == 10.0 and sc.truth.timing("up").pause_s == 5.0
    assert sc.truth.noise == pytest.approx(relative_noise(model))
    assert sc.max_replicas == 3 and sc.latency_map.names == ["fog1", "fog2", "fog3"]
    assert sc.warmup_s == 20.0 and sc.control_period_s == 10.0  # no observation: the period configured


def test_a_scattered_runs_noise_stays_below_one_so_its_scenario_loads() -> None:
    model = {"fitted": True, "alpha": 100.0, "beta": 1.0, "gamma": 0.0,
             "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 10.0, "predicted": 100.0},
                              {"n": 2, "nd_max_ms": 0.0, "mst": 900.0, "predicted": 200.0}]}
    assert relative_noise(model) == 0.9
    lmap = load_latency_map(ROOT / "inventory" / "latency" / "fog9.yaml").subset(["fog1", "fog2"])
    doc, _ = build_twin([], TIMED[:1], model, lmap.to_dict(), 2, 20.0, 10.0)
    assert scenario_from_dict(doc, "scattered").truth.noise == 0.9


@pytest.mark.parametrize("form,gamma,mst_2_37", [
    ("per-replica", 2.0, 400 * 2**0.7 - 2.0 * 2 * 37.0),
    ("per-batch", 9.0, 1 / (1 / (400 * 2**0.7) + 9.0e-6 * 37.0)),  # gamma: microseconds per record per ms
])
def test_the_twin_keeps_the_models_form_and_its_leave_one_out_errors(form: str, gamma: float,
                                                                      mst_2_37: float) -> None:
    lmap = load_latency_map(ROOT / "inventory" / "latency" / "rhine6.yaml")
    loo = {f: {"median_abs": 0.05, "max_abs": 0.1, "rms": r, "errors": [], "points": []}
           for f, r in (("paper", 0.2), ("per-replica", 0.04), ("proportional", 0.06), ("per-batch", 0.05))}
    model = {"fitted": True, "alpha": 400.0, "beta": 0.7, "gamma": gamma, "delta": 0.0, "form": form,
             "loo": loo, "measurements": [{"n": 1, "nd_max_ms": 0.0, "mst": 400.0, "predicted": 400.0},
                                          {"n": 2, "nd_max_ms": 37.0, "mst": 500.0, "predicted": 501.7}]}
    doc, _ = build_twin([], TIMED[:1], model, lmap.to_dict(), 6, 20.0, 10.0)
    truth = scenario_from_dict(doc, "calibrated").truth
    assert truth.form == form and truth.gamma == gamma
    assert truth.mst(2, 37.0) == pytest.approx(mst_2_37)
    assert truth.loo[form]["rms"] == loo[form]["rms"] and "errors" not in truth.loo["paper"]


def test_each_scale_up_in_the_report_has_the_median_random_nd_max() -> None:
    from gesscale.random_placement import median_random_nd_max
    from gesscale.testbed.report import reconfiguration_rows

    lmap = load_latency_map(ROOT / "inventory" / "latency" / "rhine6.yaml")
    reconfigs = [{"kind": "up", "nodes": ["fog1", "fog3"], "nd_max_ms": 1.529, "pause_s": 4.0, "added": ["fog3"]},
                 {"kind": "up", "nodes": ["fog1", "fog3", "fog2"], "nd_max_ms": 1.673, "pause_s": 3.0},
                 {"kind": "down", "nodes": ["fog1"], "nd_max_ms": 0.0, "pause_s": 0.5}]
    rows = reconfiguration_rows(reconfigs, lmap, seed=1, strategy="live")
    assert rows[0]["random_nd_max_ms"] == pytest.approx(36.997) == median_random_nd_max(lmap, lmap.names, 2, 1)
    assert rows[1]["random_nd_max_ms"] == pytest.approx(50.369)
    assert "random_nd_max_ms" not in rows[2] and rows[2]["strategy"] == "live"


def test_the_day_records_arrivals_are_counted_per_second_of_the_testbeds_clock() -> None:
    import numpy as np

    from gesscale.testbed.latency import arrivals_per_second

    t0 = 1_795_768_400.0
    appended_ms = np.asarray([t0 + 10.2, t0 + 10.9, t0 + 12.0, t0 + 12.5, t0 + 12.99]) * 1000.0
    assert arrivals_per_second(appended_ms, t0) == {"from_s": 10, "counts": [2, 0, 3]}
    assert arrivals_per_second(np.asarray([]), t0) == {"from_s": 0, "counts": []}


@pytest.mark.parametrize(("n", "nodes"), [(1, ("fog1",)), (2, ("fog1", "fog3")), (3, ("fog1", "fog3", "fog2"))])
def test_a_run_starts_at_min_replicas_on_the_first_node_and_its_nearest(n: int, nodes: tuple[str, ...]) -> None:
    lmap = load_latency_map(Path(__file__).resolve().parents[2] / "inventory/latency/rhine6.yaml")
    assert starting_nodes(lmap.placement_graph(), lmap.names, "fog1", n) == nodes
    others = [m for m in lmap.names if m != "fog1"]
    assert lmap.nd_max(nodes) == min(lmap.nd_max(("fog1", *rest)) for rest in combinations(others, n - 1))
