"""Hypothesis profiles of the fuzz suite: `ci` (the default) is derandomized with a fixed example budget, so a CI
run is repeatable and bounded; `dev` draws more, randomly (HYPOTHESIS_PROFILE=dev)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # each example is capped by `tests.fuzz.caps.capped` (time and memory) instead
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                              HealthCheck.data_too_large, HealthCheck.filter_too_much],
    "database": None,
    "print_blob": True,
}
settings.register_profile("ci", derandomize=True, max_examples=int(os.environ.get("GESSCALE_FUZZ_EXAMPLES", "500")),
                          **_COMMON)
settings.register_profile("dev", max_examples=2000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
