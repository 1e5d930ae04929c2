"""Pure parts of the producer: schedules, rate patterns (shared with the simulator), the synthetic trace."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from gesscale.errors import UserError
from gesscale.workloads import TAXI_HOURLY_SHARE, rate_profile
from producer.cleaning import NYC_LAT, NYC_LON
from producer.pattern import constant_rate, parse_pattern
from producer.records import Ride
from producer.schedule import by_event_time, by_rate_profile, profile_times
from producer.synthetic import synthetic_rides

T0 = datetime(2013, 1, 1)


def _ride(i: int, seconds: float) -> Ride:
    t = T0 + timedelta(seconds=seconds)
    return Ride(str(i), "M", t - timedelta(seconds=60), t, 60, 0.5, -73.98, 40.75, -73.97, 40.76)


def test_event_time_schedule_speed_and_duplication() -> None:
    rides = [_ride(1, 0), _ride(2, 60), _ride(3, 120)]
    got = [(due, r.ride_id, dup) for due, r, dup in by_event_time(rides, speed=60, duplication=2)]
    assert got == [(0.0, "1", 0), (0.0, "1", 1), (1.0, "2", 0), (1.0, "2", 1), (2.0, "3", 0), (2.0, "3", 1)]


def test_out_of_order_rides_are_due_at_once_not_earlier() -> None:
    dues = [due for due, _, _ in by_event_time([_ride(1, 0), _ride(2, 100), _ride(3, 50)], 10, 1)]
    assert dues == [0.0, 10.0, 10.0]


def test_profile_times_spread_records_and_carry_fractions() -> None:
    times = list(profile_times([4, 0, 2.5, 2.5]))
    assert times[:4] == [0.0, 0.25, 0.5, 0.75]
    assert len(times) == 9  # 4 + 0 + 2 + 3 (the halves carry over)
    assert times == sorted(times)


def test_rate_profile_schedule_fills_duplicates_and_stops() -> None:
    rides = (_ride(i, i) for i in itertools.count(1))
    got = list(by_rate_profile(rides, [3, 3], duplication=2))
    assert [(r.ride_id, d) for _, r, d in got] == [("1", 0), ("1", 1), ("2", 0), ("2", 1), ("3", 0), ("3", 1)]
    assert list(by_rate_profile([_ride(1, 0)], [10], duplication=3))[-1][2] == 2  # rides ran out first


@pytest.mark.parametrize("duplication", [1, 2, 3])
def test_rate_profile_schedule_is_due_at_the_profile_times(duplication: int) -> None:
    profile = [4, 0, 2.5, 2.5, 7.3, 0.4, 0.4, 0.4, 13]
    got = list(by_rate_profile((_ride(i, i) for i in itertools.count(1)), profile, duplication))
    assert [due for due, _, _ in got] == list(profile_times(profile))
    assert [d for _, _, d in got] == [i % duplication for i in range(len(got))]
    assert [r.ride_id for _, r, _ in got] == [str(i // duplication + 1) for i in range(len(got))]


def test_pattern_strings_and_scenario_files(tmp_path: Path) -> None:
    assert parse_pattern("cosine,mean=500,amplitude=300,period_s=600") == {
        "kind": "cosine", "mean": 500, "amplitude": 300, "period_s": 600,
    }  # fmt: skip
    assert parse_pattern("steps,levels=1000:3000:2000,step_s=10")["levels"] == [1000, 3000, 2000]
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: x\nworkload:\n  kind: spike\n  base: 10\n  peak: 50\n  duration_s: 20\n")
    spec = parse_pattern(str(scenario))
    assert spec["kind"] == "spike"
    # same shape as the simulator sees: the producer feeds the spec to the shared rate_profile
    assert rate_profile(spec, seed=3).tolist() == rate_profile(dict(spec), seed=3).tolist()
    assert constant_rate(5000, 30) == {"kind": "steps", "levels": [5000], "step_s": 30}
    assert rate_profile(constant_rate(5000, 30)).sum() == 150_000


@pytest.mark.parametrize("bad", ["sawtooth", "cosine,mean", "", "missing.yaml"])
def test_bad_patterns_are_user_errors(bad: str) -> None:
    with pytest.raises(UserError):
        parse_pattern(bad)


def test_synthetic_trace_follows_the_hourly_shape() -> None:
    rides = list(synthetic_rides(days=1, rides_per_day=48_000, seed=7))
    hours = np.bincount([r.dropoff_time.hour for r in rides], minlength=24)
    expected = 48_000 * np.asarray(TAXI_HOURLY_SHARE)
    # Poisson counts of ~400-3000 per hour: within 5 standard deviations of the shape, every hour
    assert np.all(np.abs(hours - expected) < 5 * np.sqrt(expected)), (hours, expected)
    assert abs(len(rides) - 48_000) < 5 * np.sqrt(48_000)
    assert hours.argmax() == 19 and hours.argmin() in (4, 5)


def test_synthetic_rides_are_clean_ordered_and_deterministic() -> None:
    a = list(itertools.islice(synthetic_rides(seed=3), 5000))
    b = list(itertools.islice(synthetic_rides(seed=3), 5000))
    assert a == b
    assert len({r.ride_id for r in a}) == 5000
    assert all(x.event_time <= y.event_time for x, y in itertools.pairwise(a))
    for r in a:
        assert NYC_LON[0] < r.pickup_lon < NYC_LON[1] and NYC_LAT[0] < r.dropoff_lat < NYC_LAT[1]
        assert r.trip_time_s > 0 and r.pickup_time < r.dropoff_time


def test_synthetic_source_encodes_the_same_rides_in_bulk() -> None:
    from producer.records import encode_record
    from producer.source import synthetic_source

    rides = list(itertools.islice(synthetic_source(0.2, 100_000, seed=4), 100_000))
    source = synthetic_source(0.2, 100_000, seed=4)
    encoders = list(source.encoded())
    assert source.read == len(encoders) == len(rides) > 5_000  # 0.2 day: 4 full hours (chunks) and a part
    for ride, enc in zip(rides, encoders, strict=True):
        assert enc.value(1) == encode_record(ride, 1)[1] and enc.event_time == ride.event_time
