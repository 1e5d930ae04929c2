"""`broker status`'s conformance column says what `broker up --check` recorded: failures, all pass, or none run."""

from __future__ import annotations

from gesscale.brokers.manage import BrokerStatus


def row(failed: tuple[str, ...] = (), probes: int = 0) -> BrokerStatus:
    return BrokerStatus("kafka", "noida-db", "127.0.0.1:9092", 1, True, True, failed, probes)


def test_conformance_column() -> None:
    assert row(probes=6).conformance == "all 6 pass"
    assert row(("time lookup",), probes=6).conformance == "fails: time lookup"
    assert row().conformance == "not probed"
