"""The delay daemon's scheduling (pure): delay per link by mark, jitter bounds, loss, per-flow order."""

from __future__ import annotations

import random

import pytest

from netem.delayd import DelayConfig, DelayScheduler, flow_key

MASK, SHIFT = 0x0FFF0000, 16


def _sched(links: dict, reorder: bool = False, seed: int = 1) -> DelayScheduler:
    cfg = DelayConfig.from_dict({"queue": 1, "mark_mask": MASK, "mark_shift": SHIFT, "reorder": reorder,
                                 "links": {str(k): v for k, v in links.items()}})
    return DelayScheduler(cfg, random.Random(seed))


def _mark(link: int, other_bits: int = 0x1234) -> int:
    return (link << SHIFT) | other_bits  # bits outside the mask belong to others and are ignored


def test_each_link_gets_its_own_delay_by_mark() -> None:
    s = _sched({1: {"delay_ms": 10}, 2: {"delay_ms": 40}})
    assert s.admit(100.0, _mark(1), b"a") == pytest.approx(100.010)
    assert s.admit(100.0, _mark(2), b"b") == pytest.approx(100.040)


def test_an_unknown_link_passes_at_once_and_is_counted() -> None:
    s = _sched({1: {"delay_ms": 10}})
    assert s.admit(5.0, _mark(7), b"x") == 5.0
    assert s.counts["unknown"] == 1


def test_jitter_stays_within_its_bounds_and_averages_to_the_delay() -> None:
    s = _sched({1: {"delay_ms": 20, "jitter_ms": 5}}, reorder=True)
    delays = [(s.admit(0.0, _mark(1), b"f") or 0.0) * 1000 for _ in range(5000)]
    assert min(delays) >= 15 and max(delays) <= 25
    assert sum(delays) / len(delays) == pytest.approx(20, abs=0.3)


def test_jitter_never_reorders_a_flow_unless_asked() -> None:
    ordered = _sched({1: {"delay_ms": 20, "jitter_ms": 10}})
    times = [ordered.admit(i * 0.001, _mark(1), b"flow") for i in range(2000)]
    assert times == sorted(times)
    free = _sched({1: {"delay_ms": 20, "jitter_ms": 10}}, reorder=True)
    times = [free.admit(i * 0.001, _mark(1), b"flow") for i in range(2000)]
    assert times != sorted(times)


def test_order_is_kept_per_flow_not_across_flows() -> None:
    s = _sched({1: {"delay_ms": 50}, 2: {"delay_ms": 5}})
    slow = s.admit(0.0, _mark(1), b"same-addresses")
    fast = s.admit(0.001, _mark(2), b"same-addresses")  # another link (cgroup rule) on the same addresses
    assert fast is not None and slow is not None and fast < slow


def test_loss_drops_about_the_configured_share() -> None:
    s = _sched({1: {"delay_ms": 1, "loss_pct": 10}})
    dropped = sum(s.admit(0.0, _mark(1), b"f") is None for _ in range(20000))
    assert 1700 < dropped < 2300 and s.counts["dropped"] == dropped


def test_flow_key_tells_tcp_ports_and_icmp_ids_apart() -> None:
    ip = bytes([0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 32])
    tcp_a = ip + bytes([0x9c, 0x40, 0x3b, 0xb9]) + b"\0" * 16
    tcp_b = ip + bytes([0x9c, 0x41, 0x3b, 0xb9]) + b"\0" * 16
    assert flow_key(tcp_a) != flow_key(tcp_b)
    icmp = bytearray(ip)
    icmp[9] = 1
    echo_1 = bytes(icmp) + bytes([8, 0, 0, 0, 0x00, 0x01, 0, 1])
    echo_1_later = bytes(icmp) + bytes([8, 0, 0, 0, 0x00, 0x01, 0, 2])
    echo_2 = bytes(icmp) + bytes([8, 0, 0, 0, 0x00, 0x02, 0, 1])
    assert flow_key(echo_1) == flow_key(echo_1_later) != flow_key(echo_2)


@pytest.mark.parametrize("bad", [{"queue": 1}, {"queue": 1, "mark_mask": 1, "mark_shift": 0,
                                                 "links": {"1": {"delay_ms": -1}}},
                                 {"queue": 1, "mark_mask": 1, "mark_shift": 0, "links": {"1": {"loss_pct": 101}}}])
def test_a_bad_config_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="bad delay daemon config"):
        DelayConfig.from_dict(bad)
