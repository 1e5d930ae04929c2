"""The delay daemon where several links share one pair of addresses (the local testbed, whose fog nodes open
connections from 127.0.0.1 and are told apart by marks): flows of different links and different pings are
ordered separately."""

from __future__ import annotations

from netem.userspace.model import ReleaseModel
from netem.userspace.table import LinkSpec, flow_key

IP = bytes([0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 32])


def test_icmp_echo_identifiers_are_separate_flows() -> None:
    icmp = bytearray(IP)
    icmp[9] = 1
    echo_1 = bytes(icmp) + bytes([8, 0, 0, 0, 0x00, 0x01, 0, 1])
    echo_1_later = bytes(icmp) + bytes([8, 0, 0, 0, 0x00, 0x01, 0, 2])
    echo_2 = bytes(icmp) + bytes([8, 0, 0, 0, 0x00, 0x02, 0, 1])
    assert flow_key(echo_1) == flow_key(echo_1_later) != flow_key(echo_2)


def test_tcp_ports_are_separate_flows() -> None:
    a = IP + bytes([0x9C, 0x40, 0x3B, 0xB9]) + b"\0" * 16
    b = IP + bytes([0x9C, 0x41, 0x3B, 0xB9]) + b"\0" * 16
    assert flow_key(a) != flow_key(b)


def test_two_links_on_the_same_addresses_do_not_hold_each_other_back() -> None:
    model = ReleaseModel(seed=1)
    slow = LinkSpec(1, "fog1", "site", 50.0)
    fast = LinkSpec(2, "fog2", "site", 5.0)
    flow = flow_key(IP + bytes([0x9C, 0x40, 0x3B, 0xB9]))
    t_slow = model.release_at(slow, flow, 0.0)
    t_fast = model.release_at(fast, flow, 0.001)
    assert t_slow is not None and t_fast is not None and t_fast < t_slow
    again = model.release_at(slow, flow, 0.002)  # the slow link's own flow stays in order
    assert again is not None and again >= t_slow
