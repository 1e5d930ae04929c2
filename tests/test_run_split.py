"""`make test` runs the suite as two groups at once (tests/run_split.py): every test file is in exactly one
group, and arguments that name tests run them as given."""

from __future__ import annotations

from pathlib import Path

from tests.run_split import BESIDE_DIRS, ROOT, SERVICE_DIRS, groups, names_tests


def _files(paths: list[str]) -> set[Path]:
    out: set[Path] = set()
    for p in paths:
        path = ROOT / p
        out |= {path} if path.is_file() else set(path.rglob("test_*.py"))
    return out


def test_every_test_file_is_in_exactly_one_group() -> None:
    service, pure = groups()
    a, b = _files(service), _files(pure)
    assert not a & b
    assert a | b == set((ROOT / "tests").rglob("test_*.py"))
    assert {p.split("/")[1] for p in service} == set(SERVICE_DIRS)
    assert pure[-len(BESIDE_DIRS):] == [f"tests/{d}" for d in BESIDE_DIRS]  # after the pure tests


def test_the_service_fixtures_are_used_only_by_the_service_group() -> None:
    # a test that starts a broker, Spark, the SSH fleet or a testbed through the shared fixtures belongs with the
    # services (the fleet's in BESIDE_DIRS): beside them at nice 19 it would be starved, and two of a kind could
    # collide
    markers = ("kafka_bootstrap", "spark_local", "spark_standalone", "mqtt_broker", "own_kafka", "(fleet", " fleet,",
               "Testbed.up", "run_demo(")
    _, second = groups()
    pure = [p for p in second if p.split("/")[1] not in BESIDE_DIRS]
    offenders = sorted(str(p.relative_to(ROOT)) for p in _files(pure)
                       if any(m in p.read_text() for m in markers) and p.name != "test_run_split.py")
    assert offenders == ["tests/experiment/test_repeats.py"], offenders  # its run_demo is a stand-in


def test_arguments_that_name_tests_run_as_given() -> None:
    assert names_tests(["tests/test_stats.py"])
    assert names_tests(["tests/test_stats.py::test_x", "-q"])
    assert names_tests(["-k", "fidelity", "tests/cli"])
    assert not names_tests(["--durations=60"])
    assert not names_tests(["--durations", "60", "-k", "tests", "-m", "not e2e", "-q"])
    assert not names_tests([])
