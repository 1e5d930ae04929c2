"""The measured latency map (gesscale/measured_latency.py, docs/events.md "What the controller sees"): the low median
of 3 lets a step through within two rounds of probes and ignores one outlier; the views of the three sources; the
change log; the bounds of what is measured."""

from __future__ import annotations

import numpy as np
import pytest

from gesscale.errors import UserError
from gesscale.latency_map import latency_map_from_dict
from gesscale.measured_latency import (
    MEASURED_MAX_NODES,
    UNMEASURED_RTT_MS,
    LatencyChange,
    MeasuredLatency,
    check_source,
)

MAP = {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 40}, "b": {"c": 30}}}


def prior(**extra: object) -> object:
    return latency_map_from_dict({**MAP, **extra}, "map.yaml")


def rtts(ab: float = 10, ac: float = 40, bc: float = 30) -> np.ndarray:
    return np.array([[0, ab, ac], [ab, 0, bc], [ac, bc, 0]], dtype=float)


def ab(m: MeasuredLatency) -> float:
    return float(m.smoothed_ms[0, 1])


@pytest.mark.parametrize("history", [0, 1, 2, 5], ids=lambda k: f"after {k} samples")
def test_a_step_is_seen_after_two_samples_of_the_new_value(history: int) -> None:
    m = MeasuredLatency(prior(), "measured")
    for t in range(history):
        m.add(10.0 * t, rtts())
    m.add(100.0, rtts(ab=70))
    assert ab(m) == (70 if history == 0 else 10)  # a first sample is taken as is: nothing to compare it with
    m.add(110.0, rtts(ab=70))
    assert ab(m) == 70
    down = MeasuredLatency(prior(), "measured")  # a step down, the same
    for t in range(3):
        down.add(float(t), rtts(ab=70))
    down.add(3.0, rtts())
    down.add(4.0, rtts())
    assert ab(down) == 10


@pytest.mark.parametrize("at", [1, 2, 4])
@pytest.mark.parametrize("outlier", [500.0, 0.5])
def test_one_outlier_does_not_move_the_value(at: int, outlier: float) -> None:
    m = MeasuredLatency(prior(), "measured")
    seen = []
    for t in range(6):
        m.add(float(t), rtts(ab=outlier) if t == at else rtts())
        seen.append(ab(m))
    logged = [(c.old_ms, c.new_ms) for c in m.changes if (c.a, c.b) == ("a", "b")]
    if outlier < 10 and at == 1:  # the lower of two: a low outlier at the second sample shows for one round (RTT
        assert seen == [10, 0.5, 10, 10, 10, 10]  # noise is one-sided: nothing is faster than propagation)
        assert logged == [(10, 0.5), (0.5, 10)]
    else:
        assert seen == [10] * 6 and logged == []


def test_map_is_the_prior_in_force_whatever_is_measured() -> None:
    p = prior(changes=[{"t_s": 50, "pair": ["a", "b"], "rtt_ms": 25}])
    m = MeasuredLatency(p, "map")
    m.add(10.0, rtts(ab=99))
    assert m.view(10.0) is p and m.view(60.0) is p.at(60.0) and m.view(60.0).rtt("a", "b") == 25


def test_both_takes_the_map_until_a_pair_is_measured() -> None:
    p = prior(changes=[{"t_s": 50, "pair": ["a", "c"], "rtt_ms": 45}])
    m = MeasuredLatency(p, "both")
    assert m.view(0.0) is p  # nothing measured: the map
    sample = rtts(ab=70)
    sample[0, 2] = sample[2, 0] = np.nan  # a-c not measured (its probe timed out)
    m.add(10.0, sample)
    view = m.view(10.0)
    assert view.rtt("a", "b") == 70 and view.rtt("b", "c") == 30 and view.rtt("a", "c") == 40
    assert m.view(60.0).rtt("a", "c") == 45  # an unmeasured pair follows the map's own changes
    m.add(70.0, rtts(ab=70, ac=41))
    assert m.view(70.0).rtt("a", "c") == 41  # once measured, the measurement stands


def test_measured_takes_an_unmeasured_pair_as_unreachable() -> None:
    m = MeasuredLatency(prior(), "measured")
    assert m.view(0.0).rtt("a", "b") == UNMEASURED_RTT_MS
    sample = rtts()
    sample[1, 2] = sample[2, 1] = np.nan
    m.add(10.0, sample)
    view = m.view(10.0)
    assert view.rtt("a", "b") == 10 and view.rtt("b", "c") == UNMEASURED_RTT_MS
    assert view.nd_max(["a", "b"]) == 10 and view.nd_max(["b", "c"]) == UNMEASURED_RTT_MS


def test_a_view_that_agrees_with_the_map_is_the_map_and_a_changed_one_is_built_once() -> None:
    p = prior()
    m = MeasuredLatency(p, "measured")
    m.add(10.0, rtts())
    assert m.view(10.0) is p  # its placement graph is reused: a run whose network is its map is unchanged
    m.add(20.0, rtts(ab=12))
    m.add(30.0, rtts(ab=12))
    first = m.view(30.0)
    assert first is not p and first.rtt("a", "b") == 12 and m.view(40.0) is first


def test_one_direction_stands_for_the_pair_and_two_are_averaged() -> None:
    m = MeasuredLatency(prior(), "measured")
    sample = np.full((3, 3), np.nan)
    sample[0, 1], sample[1, 0], sample[2, 0] = 10.0, 14.0, 40.0
    m.add(10.0, sample)
    assert ab(m) == 12 and m.smoothed_ms[0, 2] == 40 and np.isnan(m.smoothed_ms[1, 2])


def test_changes_over_the_threshold_are_logged_with_the_time_of_their_round() -> None:
    m = MeasuredLatency(prior(), "measured", threshold_ms=5.0)
    m.add(60.0, rtts(bc=33))  # 3 ms from the map: not logged
    assert m.changes == [] and m.changes_at(60.0) == ()
    for t in (120.0, 180.0):
        m.add(t, rtts(ab=70, bc=33))
    logged = LatencyChange(180.0, "a", "b", 10.0, 70.0)
    assert m.changes == [logged] and m.changes_at(180.0) == (logged,) and m.changes_at(120.0) == ()
    assert logged.to_dict() == {"t_s": 180.0, "pair": ["a", "b"], "old_ms": 10.0, "new_ms": 70.0}
    for t in (240.0, 300.0):  # a drift is logged once it adds up to the threshold (from the value last logged)
        m.add(t, rtts(ab=70, bc=37))
    assert m.changes[-1] == LatencyChange(300.0, "b", "c", 30.0, 37.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(UserError, match="latency_source must be one of map, measured, both, got 'probe'"):
        MeasuredLatency(prior(), "probe")
    m = MeasuredLatency(prior(), "both")
    with pytest.raises(ValueError, match="3 x 3"):
        m.add(0.0, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="negative"):
        m.add(0.0, rtts(ab=-1))


def test_a_map_too_large_to_probe_all_to_all_is_refused_for_measured_sources() -> None:
    n = MEASURED_MAX_NODES + 1
    big = latency_map_from_dict({"nodes": {f"n{i}": {"lat": 50.0 + i / 100, "lon": 8.0} for i in range(n)},
                                 "derive": "geo"}, "big.yaml")
    check_source("map", big)
    for source in ("measured", "both"):
        with pytest.raises(UserError, match=f"at most {MEASURED_MAX_NODES} nodes; big.yaml has {n}"):
            check_source(source, big)
    from gesscale.scenario import scenario_from_dict  # a scenario says so when it is loaded, before any run

    doc = {"name": "big", "cluster": {"nodes": {f"n{i}": {"lat": 50.0 + i / 100, "lon": 8.0} for i in range(n)},
                                      "derive": "geo", "max_replicas": 4},
           "operator": {"alpha": 60, "beta": 0.9, "gamma": 0.1, "initial_replicas": 1},
           "workload": {"kind": "steps", "levels": [10], "step_s": 60}, "controller": {"latency_source": "both"}}
    with pytest.raises(UserError, match=r"^s.yaml: controller: 'latency_source' both: every pair is measured"):
        scenario_from_dict(doc, "s.yaml")


def test_a_rise_shows_as_unconfirmed_for_the_one_round_before_the_smoother_takes_it() -> None:
    m = MeasuredLatency(prior(), "measured")
    m.add(0.0, rtts(ab=70))  # a first sample is taken as is: nothing to confirm
    assert m.unconfirmed(10.0) == () and ab(m) == 70
    m.add(10.0, rtts())
    m.add(20.0, rtts())
    assert m.unconfirmed(10.0) == ()
    m.add(30.0, rtts(ab=70))  # the rise's first sample: not in the view, shown as unconfirmed
    assert ab(m) == 10 and m.unconfirmed(10.0) == (("a", "b"),) and m.unconfirmed(60.0) == ()
    m.add(40.0, rtts(ab=70))  # its second: taken, so no longer unconfirmed
    assert ab(m) == 70 and m.unconfirmed(10.0) == ()


def test_an_outlier_is_unconfirmed_for_one_round_and_a_fall_never() -> None:
    m = MeasuredLatency(prior(), "measured")
    for t in range(3):
        m.add(10.0 * t, rtts())
    m.add(30.0, rtts(ac=90))
    assert m.unconfirmed(10.0) == (("a", "c"),)
    m.add(40.0, rtts())  # the outlier is gone: the view never moved
    assert m.unconfirmed(10.0) == () and float(m.smoothed_ms[0, 2]) == 40
    m.add(50.0, rtts(bc=5))  # a fall is not a rise
    assert m.unconfirmed(10.0) == ()
