"""The benchmarks' input files, by property: a placement.json (`bench_placement.py --analyse/--predict`) and a
sampled tasks file (`spark_tasks.py summarise`), valid or mutated anywhere, are analysed or refused with one of
the errors their command prints in one line (exit 2), never another exception."""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gesscale.errors import UserError
from gesscale.latency_map import load_latency_map
from tests.fuzz.caps import capped
from tests.fuzz.strategies import mutated

ROOT = Path(__file__).resolve().parents[2]
RHINE6 = ROOT / "inventory/latency/rhine6.yaml"
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_placement  # noqa: E402
import spark_tasks  # noqa: E402

LMAP = load_latency_map(RHINE6)
CONFIGS = [("near", ("fog3",)), ("near", ("fog3", "fog1")), ("far", ("fog4", "fog6")),
           ("near", ("fog3", "fog1", "fog2")), ("median", ("fog1", "fog5", "fog6")), ("far", ("fog4", "fog5", "fog6"))]
PLACEMENT = {"site": "fog2", "rows": [
    {"n": len(nodes), "kind": kind, "nodes": list(nodes), "nd_max_ms": LMAP.nd_max(nodes),
     "mst": [300.0 * len(nodes) ** 0.8, 290.0 * len(nodes) ** 0.8], "bounded": [True, True]}
    for kind, nodes in CONFIGS]}
TASKS = [{"t": 1.0, "stage": 1, "tasks": [{"host": "127.0.0.31", "ms": 400, "run_ms": 300, "records": 333},
                                          {"host": "127.0.0.34", "ms": 1500, "run_ms": 1100, "records": 333}]},
         {"t": 2.0, "stage": 2, "tasks": [{"host": "127.0.0.32", "ms": 300, "run_ms": 200, "records": 300},
                                          {"host": "127.0.0.36", "ms": 1300, "run_ms": 900, "records": 310}]}]


@given(mutated(PLACEMENT), mutated(PLACEMENT), st.booleans())
def test_fuzz_placement_file(tmp_path_factory: Any, doc: dict, other: dict, predict: bool) -> None:
    """A placement.json is analysed (and predicted) or refused in one line."""
    d = tmp_path_factory.mktemp("p")
    (d / "a.json").write_text(json.dumps(doc))
    (d / "b.json").write_text(json.dumps(other))
    with capped(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fit on hostile numbers may warn; it must not raise
        with contextlib.suppress(OSError, ValueError, UserError):  # the errors printed in one line
            bench_placement.analyse_runs(RHINE6, [d / "a.json"], [d / "b.json"] if predict else [])


@given(st.builds(lambda a, b: [a, b], mutated(TASKS[0]), mutated(TASKS[1])),
       st.sampled_from(["fog2", "fog6", "nowhere"]), st.floats(allow_nan=True))
def test_fuzz_spark_tasks_file(lines: list, site: str, factor: float) -> None:
    """Sampled tasks are summarised or refused in one line."""
    with capped(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got = spark_tasks.summary(lines, LMAP, site, factor)
        except ValueError:
            return
    assert got["site"] == site and got["left_out"] >= 0


MODEL = {"model": {"params": {"identify_tol_ms": 1.0, "max_measurements": 200, "form": "auto", "latency": "site"},
                   "measurements": [{"n": n, "nd_max_ms": d, "mst": m} for n, d, m in
                                    ((1, 0.0, 400.0), (2, 1.7, 700.0), (2, 38.1, 480.0), (3, 1.7, 950.0),
                                     (3, 38.1, 650.0), (4, 31.9, 760.0))]}}


@given(mutated(MODEL))
def test_fuzz_model_file(tmp_path_factory: Any, doc: dict) -> None:
    """A model file (`gesscale calibrate`'s, read by `--model`), its points' `latency` included, is read or refused
    with a UserError (one line), and a model read keeps a latency a controller can take."""
    from gesscale.model import MODEL_LATENCIES
    from gesscale.model_file import load_model_file

    f = tmp_path_factory.mktemp("m") / "model.json"
    f.write_text(json.dumps(doc))
    with capped(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(UserError):
            assert load_model_file(f).latency in MODEL_LATENCIES
