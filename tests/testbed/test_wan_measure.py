"""The testbed's link verdicts (pure): ping output parsing, percentiles, tolerance and loss."""

from __future__ import annotations

import pytest

from gesscale.testbed.wan_measure import judge_link, percentile, ping_times

PING = """PING 127.0.0.32 (127.0.0.32) 56(84) bytes of data.
64 bytes from 127.0.0.32: icmp_seq=1 ttl=64 time=20.4 ms
64 bytes from 127.0.0.32: icmp_seq=2 ttl=64 time=21.0 ms
64 bytes from 127.0.0.32: icmp_seq=4 ttl=64 time=20.1 ms

--- 127.0.0.32 ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 151ms
rtt min/avg/max/mdev = 20.1/20.5/21.0/0.4 ms
"""


def test_ping_times_are_read_per_echo() -> None:
    assert ping_times(PING) == [20.4, 21.0, 20.1]
    assert ping_times("64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time<0.1 ms") == [0.1]


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([1, 2, 3, 4, 5], 95) == pytest.approx(4.8)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_a_link_within_tolerance_passes_and_reports_its_figures() -> None:
    m = judge_link("fog1", "fog2", 20.0, 0.0, 3, [20.4, 21.0, 20.1])
    assert m.ok and m.median_ms == 20.4 and m.loss_pct == 0.0
    assert m.jitter_ms == pytest.approx((0.6 + 0.9) / 2, abs=1e-3)


@pytest.mark.parametrize(("configured", "times", "ok"), [
    (20.0, [22.1] * 5, False),  # 2.1 ms off; 1 ms + 5% of 20 = 2 ms allowed
    (20.0, [21.9] * 5, True),
    (0.0, [0.05] * 5, True),    # an unemulated pair: loopback's own RTT
    (0.0, [20.0] * 5, False),   # delay where none was configured (a rule caught the wrong traffic)
    (40.0, [], False),          # nothing came back
])
def test_the_verdict_compares_the_median_with_the_configured_rtt(configured: float, times: list, ok: bool) -> None:
    assert judge_link("a", "b", configured, 0.0, 5, times).ok is ok


def test_loss_is_judged_against_the_configured_loss() -> None:
    assert not judge_link("a", "b", 10.0, 0.0, 20, [10.0] * 15).ok  # 25% lost, none configured
    assert judge_link("a", "b", 10.0, 20.0, 20, [10.0] * 15).ok      # 25% lost, 20% configured
