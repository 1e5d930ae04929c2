"""Reading ping summaries and htb counters, and judging achieved against requested RTT."""

from __future__ import annotations

import subprocess

from gesscale.latency_map import latency_map_from_dict
from netem.measure import (
    PingStats,
    format_verdict,
    judge,
    parse_class_packets,
    parse_ping,
    parse_route_device,
    ping_command,
)
from netem.probe import interpret_probe, missing_netem_message

LMAP = latency_map_from_dict({"nodes": ["a", "b"], "rtt_ms": {"a": {"b": 40}}})


def test_parse_real_ping_output():
    out = subprocess.run(ping_command("127.0.0.1", 2, 0.2).split(), capture_output=True, text=True).stdout
    stats = parse_ping(out)
    assert stats is not None and stats.sent == 2 and stats.received == 2
    assert stats.rtt_min is not None and stats.rtt_min <= stats.rtt_avg <= stats.rtt_max


def test_parse_ping_without_replies_and_garbage():
    out = "--- 10.0.0.9 ping statistics ---\n3 packets transmitted, 0 received, 100% packet loss, time 2040ms\n"
    assert parse_ping(out) == PingStats(3, 0)
    assert parse_ping("ping: unknown host") is None


def test_parse_class_counters():
    out = (
        "class htb 1:1 root prio 0 rate 10Gbit ceil 10Gbit burst 0b cburst 0b \n"
        " Sent 42 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n"
        "class htb 1:10 root leaf 10: prio 0 rate 10Gbit ceil 10Gbit burst 0b cburst 0b \n"
        " Sent 588 bytes 6 pkt (dropped 0, overlimits 0 requeues 0) \n"
    )
    assert parse_class_packets(out) == {"1:1": 1, "1:10": 6}


def test_route_device():
    assert parse_route_device("10.231.0.12 dev eth0 src 10.231.0.11 uid 1000 \\    cache ") == "eth0"
    assert parse_route_device("RTNETLINK answers: Network is unreachable") is None


def test_verdict_uses_the_larger_tolerance_and_fails_on_loss():
    good = PingStats(5, 5, 41.0, 43.5, 46.0, 1.0)
    far = PingStats(5, 5, 50.0, 50.0, 50.0, 0.0)
    v = judge(LMAP, {("a", "b"): good, ("b", "a"): far}, tolerance_ms=2.0, tolerance_pct=10.0)
    assert [v.within(p) for p in v.pairs] == [True, False]  # 3.5 ms <= 4 ms (10%); 10 ms > 4 ms
    assert not v.ok
    assert v.matrix(LMAP.names) == {"a": {"b": 43.5}, "b": {"a": 50.0}}
    text = format_verdict(v)
    assert "FAIL (1 of 2 pairs outside)" in text and "+3.500" in text
    lost = judge(LMAP, {("a", "b"): None, ("b", "a"): good})
    assert not lost.ok and lost.pairs[0].loss_pct == 100.0
    assert judge(LMAP, {("a", "b"): good, ("b", "a"): good}).ok


def test_probe_messages_name_the_host():
    missing = interpret_probe("pi03", 2, "Error: Specified qdisc kind is unknown.\n")
    assert not missing.netem and "sch_netem" in missing.detail
    assert interpret_probe("pi01", 0, "").netem
    message = missing_netem_message([interpret_probe("pi01", 0, ""), missing])
    assert "1 of 2" in message and "pi03" in message and "pi01" not in message
