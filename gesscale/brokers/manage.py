"""`broker up|down|status` as functions: start the local brokers in the background, record them, stop them.

A broker already recorded and running is left as it is (up is idempotent); `down` stops only what the record
says we started. Kafka lives in `<data-dir>/kafka`, mosquitto in `<data-dir>/mqtt`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gesscale.brokers import state
from gesscale.brokers.kafka import start_kafka
from gesscale.brokers.mqtt import start_mosquitto
from gesscale.errors import UserError
from gesscale.process import ManagedProcess, port_answers, spawn, wait_until_listening


@dataclass(frozen=True)
class BrokerStatus:
    """What `status` reports for one recorded broker."""

    role: str
    impl: str
    address: str
    pid: int
    running: bool
    answering: bool
    failed_probes: tuple[str, ...]
    probes: int = 0  # conformance probes recorded by `broker up --check` (0: none were run)

    @property
    def conformance(self) -> str:
        """The conformance column of `broker status`: which probes fail, all pass, or none were run."""
        if self.failed_probes:
            return "fails: " + ", ".join(self.failed_probes)
        return f"all {self.probes} pass" if self.probes else "not probed"


def _record(role: str, impl: str, port: int, proc: ManagedProcess, data_dir: Path) -> state.BrokerRecord:
    return state.BrokerRecord(
        role=role, impl=impl, port=port, pid=proc.pid, argv=proc.argv, data_dir=str(data_dir), log=str(proc.log_path)
    )


def up(
    data_dir: Path, kafka_port: int | None, mqtt_port: int | None, kafka_impl: str, check: bool
) -> tuple[list[state.BrokerRecord], list[state.BrokerRecord]]:
    """Start the requested brokers unless already running; return (started, already running).

    With `check`, the conformance probes run against the new Kafka and their verdicts are recorded.
    """
    from gesscale.brokers.conformance import run_probes

    data_dir = data_dir.resolve()
    records = state.load(data_dir)
    started: list[state.BrokerRecord] = []
    kept: list[state.BrokerRecord] = []
    wanted = [("kafka", kafka_port), ("mqtt", mqtt_port)]
    try:
        for role, port in wanted:
            if port is None:
                continue
            old = records.get(role)
            if old is not None and old.running():
                kept.append(old)
                continue
            if role == "kafka":
                broker = start_kafka(port, data_dir / "kafka", impl=kafka_impl)
                rec = _record(role, kafka_impl, port, broker.process, broker.data_dir)
                if check:
                    rec.conformance = {r.name: r.ok for r in run_probes(broker.bootstrap)}
            else:
                mqtt = start_mosquitto(port, data_dir / "mqtt")
                rec = _record(role, "mosquitto", port, mqtt.process, mqtt.data_dir)
            records[role] = rec
            started.append(rec)
            state.save(data_dir, records)
    except BaseException:
        # Do not leave half a setup running behind an error.
        for rec in started:
            _stop(rec)
            records.pop(rec.role, None)
        state.save(data_dir, records)
        raise
    return started, kept


def _stop(rec: state.BrokerRecord) -> bool:
    if not rec.running():
        return False
    ManagedProcess(pid=rec.pid, argv=rec.argv, log_path=Path(rec.log)).stop()
    return True


def down(data_dir: Path) -> list[tuple[state.BrokerRecord, bool]]:
    """Stop every recorded broker that still runs; return (record, was running) and forget them."""
    data_dir = data_dir.resolve()
    records = state.load(data_dir)
    result = [(rec, _stop(rec)) for rec in records.values()]
    state.save(data_dir, {})
    return result


def status(data_dir: Path) -> list[BrokerStatus]:
    """The recorded brokers: running, answering on their port, failed conformance probes."""
    out = []
    for rec in state.load(data_dir.resolve()).values():
        out.append(
            BrokerStatus(
                role=rec.role,
                impl=rec.impl,
                address=f"127.0.0.1:{rec.port}",
                pid=rec.pid,
                running=rec.running(),
                answering=port_answers(rec.port),
                failed_probes=tuple(name for name, ok in rec.conformance.items() if not ok),
                probes=len(rec.conformance),
            )
        )
    return out


def kill_and_restart(data_dir: Path, role: str = "kafka", down_s: float = 0.3) -> None:
    """SIGKILL the broker `up` recorded under `data_dir` (a crash), start it again `down_s` later with the same
    command line and data, and record the new PID. For the kill -9 conformance probe."""
    import signal
    import time

    data_dir = data_dir.resolve()
    records = state.load(data_dir)
    rec = records.get(role)
    if rec is None or not rec.running():
        raise UserError(f"no running {role} broker recorded in {data_dir} (start it with 'gesscale broker up')")
    os_kill(rec.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while rec.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(down_s)
    proc = spawn(rec.argv, Path(rec.log), cwd=Path(rec.data_dir))
    wait_until_listening(proc, rec.port, f"{role} broker ({rec.impl})")
    rec.pid = proc.pid
    records[role] = rec
    state.save(data_dir, records)


def os_kill(pid: int, sig: int) -> None:
    """Send `sig` to `pid` (a separate function so that the only signal this module sends is easy to find)."""
    import os

    os.kill(pid, sig)
