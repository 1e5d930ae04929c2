"""Hypothesis profiles and the example budget of the fuzz suite.

Profiles: `ci` (the default) is derandomized, so a CI run draws the same examples every time and is bounded;
`dev` draws randomly, 2,000 examples per property (HYPOTHESIS_PROFILE=dev), to look for new findings.

Budget (the `ci` profile): CI time is the binding constraint, so each property gets the examples its cost
allows rather than one number for all. `BUDGET` gives them per test; the cheap in-process checks of one value
or one small document (an option, an environment, a YAML text) get the most, the properties that build files
and folders per example (a bundle, an inventory read by Ansible, a scenario through the YAML loaders and the
simulator's checks) fewer. Every property is listed (`test_budget.py` checks it), so a new one is budgeted
on purpose. GESSCALE_FUZZ_EXAMPLES=N gives every property N examples instead (a longer local run).
Measured figures (2 cores shared, `ci` profile): tests/README.md, "Fuzzing".
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # each example is capped by `tests.fuzz.caps.capped` (time and memory) instead
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                              HealthCheck.data_too_large, HealthCheck.filter_too_much],
    "database": None,
    "print_blob": True,
}
DEFAULT_EXAMPLES = 300
settings.register_profile("ci", derandomize=True, max_examples=DEFAULT_EXAMPLES, **_COMMON)
settings.register_profile("dev", max_examples=2000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Examples per property in the `ci` profile (test function name -> examples).
BUDGET: dict[str, int] = {
    # the command line: one value through the real entry point, or one option's declaration
    "test_fuzz_cli_values": 400,
    "test_fuzz_option_values": 500,
    "test_fuzz_cli_ranges": 100,  # beside the deterministic edges of every number (test_fuzz_cli.py)
    # one document in memory
    "test_fuzz_scenario": 300,
    "test_fuzz_latency_map": 300,
    "test_fuzz_inventory_host": 300,
    "test_fuzz_experiment_spec": 200,
    "test_fuzz_local_spec": 200,
    "test_fuzz_yaml_loaders_agree": 300,
    # one file or folder written per example
    "test_fuzz_scenario_yaml": 200,
    "test_fuzz_state_file": 200,
    "test_fuzz_rate_csv": 200,
    "test_fuzz_rtt_matrix": 200,
    "test_fuzz_plugin": 150,
    "test_fuzz_bundle": 150,
    "test_fuzz_inventory_file": 100,  # Ansible's inventory manager: about 25 ms an example
    "test_fuzz_model_file": 200,  # a model file, refitted with auto on six points
    "test_fuzz_placement_file": 150,  # two placement.json, every form fitted: about 60 ms an example
    # the GESSCALE_* environment
    "test_fuzz_kafka_security_env": 300,
    "test_fuzz_mqtt_security_env": 200,
    "test_fuzz_tansu_bin": 100,
    "test_fuzz_job_token": 100,
    "test_fuzz_k3s_token": 100,
    "test_fuzz_figure_formats": 300,
    # the fog events of a map (a small schema)
    # the benchmarks' files in memory
    "test_fuzz_spark_tasks_file": 300,
    "test_fuzz_fog_events": 150,
    "test_fuzz_link_outages": 150,  # valid partitions and flaps: the userspace engine's tables against the schedule
}


def examples_for(name: str) -> int | None:
    """The examples a property runs in this session: GESSCALE_FUZZ_EXAMPLES when set, else its budget in the
    `ci` profile; None leaves the profile's own number (the `dev` profile)."""
    if os.environ.get("GESSCALE_FUZZ_EXAMPLES"):
        return int(os.environ["GESSCALE_FUZZ_EXAMPLES"])
    if settings().derandomize:  # the ci profile
        return BUDGET.get(name, DEFAULT_EXAMPLES)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every property of this folder its number of examples (`BUDGET`)."""
    for item in items:
        test = getattr(item, "obj", None)
        if not getattr(test, "is_hypothesis_test", False) or "tests/fuzz/" not in item.nodeid:
            continue
        if getattr(test, "_hypothesis_internal_settings_applied", False):
            continue  # its own @settings (hypothesis refuses a second one); test_budget.py asks for a BUDGET entry
        n = examples_for(item.originalname)
        if n is not None:
            settings(settings.default, max_examples=n)(test)
            test.gesscale_budgeted = True  # (test_budget.py tells this from an own @settings)
