"""A small experiment bundle built once per test session (a 2-hour spike, two policies, one seed: ~5 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gesscale.experiment.bundle import run_experiment
from gesscale.experiment.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = f"""name: spike-two
environment: sim
scenario: {ROOT / "scenarios/pi10-spike.yaml"}
workload: {{kind: spike, base: 120, peak: 340, at_s: 1800, width_s: 1800, duration_s: 7200}}
policies: [gesscale, thr-nlaware]
seeds: 1
controller: {{warmup_s: 180}}
"""


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle folder of `SPEC`."""
    folder = tmp_path_factory.mktemp("experiment")
    spec = folder / "exp.yaml"
    spec.write_text(SPEC)
    out = folder / "bundle"
    run_experiment(load_spec(spec), out, ["gesscale", "experiment", "run", str(spec), "--out", str(out)])
    return out
