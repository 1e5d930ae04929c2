"""`make test`: the whole suite as two pytest processes at once, so that its wall time fits CI's budget.

The suite's time goes mostly to end-to-end tests that wait: for Spark executors starting inside quarter-core
CPU budgets, for brokers, for SSH hosts. While they wait, a core is often idle. The tests that start no service
(pure logic, the simulator, figures, the CLI, property tests: several minutes on their own) fill those idle
cycles in a second pytest process at the lowest CPU priority (nice 19), so they take almost nothing from the
live tests, whose measurements (a node's sustained rate, a calibration's ordering) stay what they were alone.

The two groups are split by folder (`SERVICE_DIRS`: the folders whose tests start brokers, Spark, namespaces
on the host's own network, iptables rules or the delay daemon); every test file is in exactly one group
(tests/test_run_split.py checks it). Each group has its own ports, temporary folders and fixtures; none uses a
fixed resource of the other.

One service folder runs in the second process after the pure tests (`BESIDE_DIRS`): `fleet`, whose SSH hosts are
network namespaces with a network of their own (tests/fleet/netns_fleet.py; the machine-wide fleet lock orders it
with the docs examples that use a fleet too). Its time goes mostly to Ansible on the controller side, which
needs no exclusive core; the hosts themselves (sshd, the delay daemons the tests measure) run at normal
priority whatever the test runner's, as real hosts would. Clean clone, CI form: `fleet` took about 230 s of the
service process's 1714 s at 91316a1; with it beside, the service process took 1606 s at 1bcd96b (the Spark tests
ran slower beside the fleet's hosts: tests/faults/test_spark.py 134 -> 184 s), the other 655 s, 28 min 41 s in
all with the bootstrap.

Arguments are pytest's. When they name tests (a path or a node id), one pytest runs them as given: the split is
for the whole suite. The exit status is the first non-zero of the two (0 when both passed); the pure group's
output follows the service group's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# Folders whose tests start services (brokers, Spark, the testbed, SSH namespace hosts, iptables, the delay daemon).
SERVICE_DIRS = ("brokers", "faults", "jobs", "netem", "producer", "testbed")
# Service folders that run in the second process, after the pure tests (module docstring).
BESIDE_DIRS = ("fleet",)


def groups(tests: Path = TESTS) -> tuple[list[str], list[str]]:
    """(service paths, second-process paths) relative to the project root: the service folders; then every other
    test folder and top-level test file, followed by `BESIDE_DIRS`."""
    service = [f"tests/{d}" for d in SERVICE_DIRS if (tests / d).is_dir()]
    skip = {*SERVICE_DIRS, *BESIDE_DIRS, "fixtures", "data", "__pycache__"}
    pure = sorted(f"tests/{p.name}" for p in tests.iterdir()
                  if (p.is_dir() and p.name not in skip and any(p.rglob("test_*.py")))
                  or (p.is_file() and p.name.startswith("test_") and p.suffix == ".py"))
    beside = [f"tests/{d}" for d in BESIDE_DIRS if (tests / d).is_dir()]
    return service, pure + beside


def names_tests(args: Sequence[str]) -> bool:
    """Whether pytest's arguments select test paths or node ids (then the split does not apply)."""
    takes_value = {"-k", "-m", "-p", "-o", "-c", "--durations", "--basetemp", "--rootdir", "--confcutdir",
                   "--deselect", "--ignore", "--maxfail", "--junitxml", "--tb", "-W"}
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in takes_value:
            skip = True
            continue
        if not arg.startswith("-") and (Path(arg.split("::")[0]).exists() or "::" in arg):
            return True
    return False


def _lowest_priority() -> None:  # pragma: no cover - runs in the child before exec
    os.nice(19)


def main(argv: Sequence[str]) -> int:
    """Run the suite split in two (module docstring); returns the exit status."""
    pytest = [sys.executable, "-m", "pytest"]
    if names_tests(argv):
        return subprocess.call([*pytest, *argv], cwd=ROOT)
    service, pure = groups()
    t0 = time.monotonic()
    ended: dict[str, float] = {}
    with tempfile.TemporaryFile("w+") as pure_out:
        pure_proc = subprocess.Popen([*pytest, *argv, *pure], cwd=ROOT, stdout=pure_out, stderr=subprocess.STDOUT,
                                     preexec_fn=_lowest_priority)
        watcher = threading.Thread(target=lambda: (pure_proc.wait(), ended.setdefault("pure", time.monotonic())))
        watcher.start()
        service_rc = subprocess.call([*pytest, *argv, *service], cwd=ROOT)
        ended["service"] = time.monotonic()
        watcher.join()
        pure_rc = pure_proc.returncode
        pure_out.seek(0)
        print(f"\n===== run beside the services at nice 19: {' '.join(pure)} =====",
              flush=True)
        for line in pure_out:
            sys.stdout.write(line)
    print(f"\nsuite: services {ended['service'] - t0:.0f} s (exit {service_rc}), beside them "
          f"{ended['pure'] - t0:.0f} s (exit {pure_rc}), wall {time.monotonic() - t0:.0f} s", flush=True)
    return service_rc or pure_rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
