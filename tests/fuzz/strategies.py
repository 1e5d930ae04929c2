"""Hypothesis strategies for every input schema: a valid document with a few of its values replaced by hostile
ones (wrong types, NaN and infinity, huge integers, out-of-range numbers, control characters, deep nesting),
keys removed or added, so that both the valid and the invalid sides of each check are drawn."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from hypothesis import strategies as st

from gesscale.config import LATENCY_SOURCES, ControllerConfig
from gesscale.model import FORMS
from gesscale.scenario import RECONFIG_KINDS
from gesscale.workloads import WORKLOAD_KEYS

# Numbers at and beyond the edges of every declared range.
EDGE_NUMBERS = [0, -1, 1, 2, 0.5, -0.0, 1e-308, 1e308, -1e308, 86400, 86401, 3600, 3601, 1e9, 1e9 + 1,
                2**31, 2**63, 10**19, 10**400, -(10**400), math.nan, math.inf, -math.inf]
DURATION_TEXTS = ["4h", "10s", "2m", "1.5min", "500ms", "1d", "2d", "1e400s", "nan", "inf", "-5m", "5 h", "h",
                  "", " ", "10s\n", "1" * 500]

texts = st.text(max_size=20) | st.sampled_from(["a\nb", "\x00", "\t", "x" * 5000, "../../etc/passwd", "é", "\u202e"])
numbers = (st.sampled_from(EDGE_NUMBERS) | st.integers(-(10**6), 10**6) | st.integers(-(10**500), 10**500)
           | st.floats(allow_nan=True, allow_infinity=True))


def nested(depth: int = 4) -> st.SearchStrategy[Any]:
    """Lists and mappings of scalars, a few levels deep."""
    return st.recursive(numbers | texts | st.none() | st.booleans(),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                        max_leaves=8)


hostile = (numbers | texts | st.none() | st.booleans() | st.sampled_from(DURATION_TEXTS) | nested()
           | st.builds(lambda n: [[[0]]] * n, st.integers(0, 3)))

MAP = {"nodes": ["a", "b", "c"], "rtt_ms": {"a": {"b": 10, "c": 20}, "b": {"c": 15}}}
_KIND_BASES = {
    "taxi": {"kind": "taxi", "speed": 10, "duplication": 3, "days": 0.5},
    "cosine": {"kind": "cosine", "mean": 100, "amplitude": 50, "period_s": 3600, "duration_s": 7200},
    "random": {"kind": "random", "mean": 100, "spread": 50, "duration_s": 3600},
    "increasing": {"kind": "increasing", "start": 10, "end": 200, "duration_s": 3600},
    "decreasing": {"kind": "decreasing", "start": 200, "end": 10, "duration_s": 3600},
    "spike": {"kind": "spike", "base": 50, "peak": 300, "at_s": 600, "width_s": 300, "duration_s": 3600},
    "steps": {"kind": "steps", "levels": [50, 150, 80], "step_s": 600},
}


def base_scenario(kind: str) -> dict[str, Any]:
    """A valid scenario with an inline map and a workload of `kind`."""
    return {
        "name": "fuzz", "control_period_s": 60, "warmup_s": 180, "seed": 1,
        "cluster": {**copy.deepcopy(MAP), "min_replicas": 1, "max_replicas": 3},
        "operator": {"alpha": 60.0, "beta": 0.9, "gamma": 0.1, "noise": 0.03, "reconfig_pause_s": 120,
                     "initial_replicas": 1},
        "workload": copy.deepcopy(_KIND_BASES[kind]),
    }


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a nested mapping (the places a mutation may hit)."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    return out


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        nxt = doc.get(k)
        if not isinstance(nxt, dict):
            nxt = doc[k] = {}
        doc = nxt
    doc[path[-1]] = value


def _delete(doc: dict[str, Any], path: tuple[Any, ...]) -> None:
    for k in path[:-1]:
        doc = doc.get(k)
        if not isinstance(doc, dict):
            return
    doc.pop(path[-1], None)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any], extra_paths: list[tuple[Any, ...]] = ()) -> dict[str, Any]:
    """`base` with 0 to 3 mutations: a value replaced by a hostile one, a key deleted or an unknown key added."""
    doc = copy.deepcopy(base)
    paths = _paths(doc) + list(extra_paths)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        path = draw(st.sampled_from(paths))
        if action == "set":
            _set(doc, path, draw(hostile))
        elif action == "delete":
            _delete(doc, path)
        else:
            _set(doc, (*path[:-1], draw(texts)), draw(hostile))
    return doc


_RECONFIG = [("operator", "reconfig", kind, key) for kind in RECONFIG_KINDS
             for key in ("effective_s", "pause_s", "observation_gap_s", "per_node")]
# What a live run's twin adds (gesscale/twin.py, docs/scenarios.md): the run's end, its cold start, its CPU share.
_TWIN = [("after_drain", "periods"), ("after_drain", "max_periods"), ("input_end_known",),
         ("operator", "cold_start", "seconds"), ("operator", "cold_start", "rate"), ("operator", "cpu", "share"),
         ("operator", "cpu", "exponent"), ("operator", "cpu", "noise")]
_CONTROLLER = [("controller", f) for f in ControllerConfig.__dataclass_fields__ if f != "recommend_only"]
_POLICY_OPTIONS = [("policy_options", "optimal", "bins"), ("policy_options", "optimal", "max_delay_s"),
                   ("policy_options", "keda-lag", "lag_threshold"), ("policy_options", "static", "replicas"),
                   ("policy_options", "gesscale-plus", "trend_window")]


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """Scenario documents (docs/scenarios.md), valid and not."""
    kind = draw(st.sampled_from(sorted(_KIND_BASES)))
    workload_keys = [("workload", k) for k in WORKLOAD_KEYS[kind]]
    base = base_scenario(kind)
    if draw(st.integers(0, 2)) == 0:  # the map in a file beside the scenario (the YAML test writes map.yaml)
        base["cluster"] = {"latency_map": "map.yaml", "min_replicas": 1, "max_replicas": 3}
    if draw(st.booleans()):  # a twin's measured reconfiguration timing (gesscale/twin.py)
        base["operator"]["reconfig"] = {"up": {"effective_s": 40, "pause_s": 7, "observation_gap_s": 45,
                                               "per_node": True},
                                        "down": {"effective_s": 8, "pause_s": 4}}
    if draw(st.booleans()):  # the rest of a live run's twin
        base["after_drain"] = {"periods": 3, "max_periods": 8}
        base["input_end_known"] = False
        base["operator"]["cold_start"] = {"seconds": 7, "rate": 10.0}
        base["operator"]["cpu"] = {"share": 0.9, "exponent": -0.3, "noise": 0.05}
    if draw(st.booleans()):  # the ground truth in one of the model's forms (a choice: hostile values seldom hit one)
        base["operator"]["form"] = draw(st.sampled_from(sorted(FORMS)))
        base["operator"]["delta"] = 0.004
    if draw(st.booleans()):  # what the controller sees of the network (a choice: hostile values seldom hit one)
        base["controller"] = {"latency_source": draw(st.sampled_from(LATENCY_SOURCES))}
    if draw(st.booleans()):  # the latency from the site (gesscale/site_view.py): operator and controller
        base["cluster"]["site"] = "a"
        base["operator"]["latency"] = "site"
        base.setdefault("controller", {})["model_latency"] = "site"
    if draw(st.booleans()):  # a twin of a live run with events (gesscale/twin.py): the run's events, first nodes
        base["events"] = [{"t_s": 60, "event": "crash", "node": "a", "duration_s": 120}]
        base["operator"]["initial_nodes"] = ["a"]
    return draw(mutated(base, [*_CONTROLLER, *_POLICY_OPTIONS, *workload_keys, *_RECONFIG, *_TWIN,
                               ("events",), ("operator", "initial_nodes"), ("operator", "form"),
                               ("operator", "gamma"), ("operator", "delta"), ("cluster", "site"),
                               ("operator", "latency")]))


LINK_KEYS = ("jitter_ms", "loss_pct", "bandwidth_mbit")


@st.composite
def latency_maps(draw: st.DrawFn) -> dict[str, Any]:
    """Latency map documents: nodes, RTTs, defaults, link properties, changes."""
    listed = {**copy.deepcopy(MAP), "default_rtt_ms": 30, "link_defaults": {"jitter_ms": 1, "loss_pct": 0},
              "changes": [{"t_s": 600, "node": "a", "add_rtt_ms": 10}]}
    extra = [("link_defaults", k) for k in LINK_KEYS] + [("derive",), ("geo",), ("symmetry_tolerance_ms",)]
    if draw(st.booleans()):
        return draw(mutated(listed, extra))
    return draw(mutated(GEO_MAP, [*extra, ("links", "a", "c"), ("nodes", "a", "region")]))


# Nodes with coordinates and regions, RTTs derived from them (one pair given), per-link properties.
GEO_MAP: dict[str, Any] = {
    "nodes": {"a": {"lat": 50.1, "lon": 8.7, "region": "fra"}, "b": {"lat": 48.1, "lon": 11.6},
              "c": {"lat": 52.5, "lon": 13.4, "region": "ber"}},
    "derive": "geo", "geo": {"stretch": 2.0, "base_ms": 1.0}, "rtt_ms": {"a": {"b": 12}},
    "links": {"a": {"b": {"jitter_ms": 1, "loss_pct": 0.5, "bandwidth_mbit": 100}}},
}


@st.composite
def experiment_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Experiment spec documents (docs/experiments.md) for the simulator."""
    base = {"name": "fuzz", "environment": "sim", "scenario": "s.yaml", "policies": ["static", "gesscale"],
            "seeds": 2, "control_period_s": 60}
    extra = [("workload",), ("latency_map",), ("controller",), ("policy_options",), ("model",)]
    return draw(mutated(base, extra))


@st.composite
def state_texts(draw: st.DrawFn) -> str:
    """Controller state files: JSON (with NaN and Infinity as Python writes them), or damaged text."""
    base = {"policy": "gesscale", "policy_state": {"alpha": 60.0}, "last_reconfig_s": 120.0,
            "pending": {"nodes": ["a"], "time_s": 60.0}, "rng": None}
    doc = draw(mutated(base))
    text = json.dumps(doc, default=str)
    return draw(st.sampled_from([text, text[: len(text) // 2], text + "\x00", "\ufeff" + text]))


@st.composite
def rate_csvs(draw: st.DrawFn) -> bytes:
    """Rate CSV files (t_s,rate): text with hostile cells, binary, gzip, or no header."""
    import gzip

    # A valid file (increasing times, rates of at least 0) with one cell in three replaced by a hostile one.
    times = sorted(draw(st.sets(st.integers(0, 7200), min_size=1, max_size=6)))
    rows = [(t, draw(st.floats(0, 1e4))) if draw(st.integers(0, 2)) else (draw(numbers | texts), draw(numbers | texts))
            for t in times]
    header = "t_s,rate" if draw(st.booleans()) else draw(st.sampled_from(["t_s, rate", "rate", "", "t_s,rate,extra"]))
    text = "\n".join([header, *(f"{a},{b}" for a, b in rows)]) + "\n"
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        return data
    return draw(st.sampled_from([gzip.compress(data), b"\x00\xff" + data, data * 3]))


BUNDLE_SPEC: dict[str, Any] = {
    "name": "fuzz", "environment": "sim", "scenario_path": "s.yaml", "policies": ["static"], "seeds": 1,
    "latency_map": None, "workload": None, "control_period_s": None, "controller": {}, "policy_options": {},
    "model": None, "plugins": {},
}
# The manifest of a bundle carrying its scenario; "HASH" stands for the copy's SHA-256 (the test computes it).
BUNDLE_MANIFEST: dict[str, Any] = {"format": 2, "inputs": {"scenario": {"file": "inputs/scenario.yaml",
                                                                        "sha256": "HASH"}}}
CARRIED_FILES = ["inputs/scenario.yaml", "../outside.yaml", "/etc/hostname", "inputs/../../outside.yaml", "inputs",
                 "inputs/missing.yaml", "inputs/fifo", "x" * 5000, "a\x00b", "", "inputs/link-out"]


@st.composite
def bundles(draw: st.DrawFn) -> tuple[str, str]:
    """(spec.resolved.json, manifest.json) texts of a bundle: as `experiment run` writes them, mutated, carried
    files named anywhere (outside the bundle, a FIFO, a link out), or not JSON objects at all."""
    spec = draw(nested() if draw(st.integers(0, 5)) == 0 else mutated(BUNDLE_SPEC, [("plugins", "fuzz-plugin")]))
    manifest = draw(nested() if draw(st.integers(0, 5)) == 0 else mutated(
        BUNDLE_MANIFEST, [("inputs", "latency_map"), ("inputs", "model"), ("inputs", "plugin:fuzz-plugin")]))
    if isinstance(manifest, dict) and isinstance(manifest.get("inputs"), dict) and draw(st.integers(0, 2)) == 0:
        role = draw(st.sampled_from(["scenario", "latency_map", "model"]))
        manifest["inputs"][role] = {"file": draw(st.sampled_from(CARRIED_FILES)),
                                    "sha256": draw(st.sampled_from(["HASH", "0" * 64, None]))}
    return json.dumps(spec, default=str), json.dumps(manifest, default=str)


PLUGIN_BODIES = [
    "raise SystemExit(0)", "raise SystemExit(3)", "import sys; sys.exit()",
    "raise ValueError('x' * 100000)", "raise RuntimeError('a\\nb')", "def broken(:", "x = 1 / 0", "",
    "import os; os.environ.get('HOME')", "raise MemoryError", "raise RecursionError", "class Nope: pass",
]


@st.composite
def plugins(draw: st.DrawFn) -> str:
    """A policy plug-in file: hostile module code, and a class that may or may not be a policy."""
    body = draw(st.sampled_from(PLUGIN_BODIES))
    policy = draw(st.sampled_from([
        "", "from gesscale.policies.base import Policy\nclass Fuzz(Policy):\n    id = 'fuzz-plugin'\n",
        "class Fuzz:\n    id = 'fuzz'\n", "Fuzz = 3\n",
        "from gesscale.policies.base import Policy\nclass Fuzz(Policy):\n    id = None\n",
        "from gesscale.policies.base import Policy\nclass Fuzz(Policy):\n    id = 'static'\n",
    ]))
    return f"{policy}\n{body}\n" if draw(st.booleans()) else f"{body}\n{policy}\n"


def yaml_with_aliases(doc: Any) -> st.SearchStrategy[str]:
    """The YAML text of `doc`, or of a document where aliases stand for repeated parts (bombs included)."""
    import yaml

    plain = yaml.safe_dump(doc, default_flow_style=None, allow_unicode=True)

    def bomb(levels: int, width: int) -> str:
        lines = ['l0: &l0 ["x"]']
        for i in range(1, levels):
            lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]")
        return "\n".join(lines) + "\n" + plain

    return st.one_of(st.just(plain), st.builds(bomb, st.integers(1, 12), st.integers(1, 12)),
                     st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 20_000)),
                     st.builds(lambda n: "- " * n + "x\n", st.integers(1, 20_000)),
                     st.just("a: &a [*a]\n" + plain), st.just(plain.replace("  ", "\t", 1)))


# One valid entry of each kind of the fog events schema (gesscale/events.py) on MAP's nodes, with the keys each
# kind may hold (a mutation may set one that is absent).
EVENT_BASES = {
    "link": {"t_s": 60, "pair": ["a", "b"], "add_rtt_ms": 40},
    "partition": {"t_s": 60, "event": "partition", "groups": [["a"], ["b", "c"]], "duration_s": 300},
    "partition-pairs": {"t_s": 60, "event": "partition", "pairs": [["a", "c"]]},
    "flap": {"t_s": 60, "event": "flap", "pair": ["a", "b"], "period_s": 60, "down_s": 10, "duration_s": 600},
    "crash": {"t_s": 60, "event": "crash", "node": "b", "duration_s": 120},
    "leave": {"t_s": 60, "event": "leave", "node": "c", "drain_s": 30},
    "join": {"t_s": 60, "event": "join", "node": "a"},
    "churn": {"t_s": 0, "event": "churn", "rate_per_h": 6, "duration_s": 3600, "down_s": 60, "seed": 1,
              "nodes": ["a", "b"]},
}


@st.composite
def fog_events(draw: st.DrawFn) -> list[Any]:
    """Lists of 1 to 3 event entries (a map's `changes:`, an experiment's `events:`, `--events FILE`), each a
    valid entry of one kind with 0 to 3 mutations, or a hostile value in place of an entry."""
    from gesscale.events import KEYS

    entries: list[Any] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(sorted(EVENT_BASES)))
        base = EVENT_BASES[kind]
        keys = KEYS.get(str(base.get("event")), ("t_s", "node", "pair", "rtt_ms", "add_rtt_ms", *LINK_KEYS))
        entry = draw(mutated(base, [(k,) for k in keys]) | hostile)
        entries.append(entry)
    return entries


# -- rtt_matrix: a latency map's dense .npy matrix (gesscale/latency_map.py, `_read_matrix`) --------------------
MATRIX_DTYPES = ["float64", "float32", "float16", "int32", "int64", "uint8", "uint64", ">f8", "bool", "complex64",
                 "timedelta64[us]", "datetime64[s]", "U4", "S4", "i4,i4"]
MATRIX_CELLS = [0.0, 10.0, 15.5, 9999.999, 10000.0, 10000.5, -1.0, -0.0, 1e-9, 1e6, 1e308, math.nan, math.inf,
                -math.inf]
# Raw bytes that claim to be a .npy file: empty, a bare magic, a header promising more than the data, pickled
# objects, text, gzip.
MATRIX_FILES = [
    b"", b"\x93NUMPY", b"\x93NUMPY\x01\x00",
    b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3), }" + b" " * 51 + b"\n",
    b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000), }" + b" " * 41
    + b"\n" + b"\0" * 72,
    b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (3, 3), }" + b" " * 51 + b"\n"
    + b"\x80\x04N.",
    b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (-3, 3), }" + b" " * 50 + b"\n",
    b"\x93NUMPY\x01\x00v\x00__import__('os').system('true')" + b" " * 60 + b"\n",
    b"0,10,20\n10,0,15\n20,15,0\n", b"\x1f\x8b\x08\x00" + b"\0" * 20,
]


@st.composite
def rtt_matrices(draw: st.DrawFn, n: int = 3) -> tuple[str, Any]:
    """("array", numpy array) for `np.save`, or ("bytes", raw file content): a valid symmetric N x N matrix with
    zero diagonal, damaged in 0 to 2 cells, in a drawn dtype and shape, or not a .npy file at all."""
    import warnings

    import numpy as np

    def hostile_part() -> bool:  # each part of the file is damaged one time in four, so a third are valid
        return draw(st.integers(0, 3)) == 0

    if draw(st.integers(0, 9)) == 0:
        return "bytes", draw(st.sampled_from(MATRIX_FILES))
    size = draw(st.sampled_from([n - 1, n + 1, 0])) if hostile_part() else n
    ms = np.zeros((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            ms[i, j] = ms[j, i] = draw(st.sampled_from([10.0, 15.5, 20.0, 0.5, 9999.0]))
    for _ in range(draw(st.integers(1, 2)) if size and hostile_part() else 0):
        i, j = draw(st.integers(0, size - 1)), draw(st.integers(0, size - 1))
        ms[i, j] = draw(st.sampled_from(MATRIX_CELLS))
    dtype = np.dtype(draw(st.sampled_from(MATRIX_DTYPES if hostile_part() else MATRIX_DTYPES[:8])))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if dtype.names:
            arr = np.zeros(ms.shape, dtype=dtype)
        elif dtype.kind in "iu":  # integer microseconds, as `write_rtt_matrix` writes them
            arr = np.nan_to_num(ms * 1000, posinf=2**62, neginf=-(2**62)).astype(dtype)
        elif dtype.kind == "m":
            arr = np.nan_to_num(ms * 1000, posinf=0, neginf=0).astype("int64").astype(dtype)
        elif dtype.kind == "M":
            arr = np.zeros(ms.shape, dtype=dtype)
        elif dtype.kind in "US":
            arr = ms.astype(dtype)
        else:
            arr = ms.astype(dtype)
    shape = draw(st.sampled_from(["flat", "scalar", "3d", "fortran"])) if hostile_part() else "same"
    if shape == "flat":
        arr = arr.reshape(-1)
    elif shape == "scalar":
        arr = np.asarray(arr.flat[0] if arr.size else 0, dtype=arr.dtype)
    elif shape == "3d":
        arr = arr[..., None]
    elif shape == "fortran":
        arr = np.asfortranarray(arr)
    return "array", arr


@st.composite
def matrix_refs(draw: st.DrawFn) -> Any:
    """What `rtt_matrix:` names: the written file (`FILE`, replaced by the test), or a hostile reference."""
    if draw(st.integers(0, 3)):
        return "FILE"
    return draw(st.sampled_from(["missing.npy", "FIFO", "DIR", "/dev/zero.npy", "m.txt", ".npy", "x" * 5000 + ".npy",
                                 "a\nb.npy", "../" * 40 + "m.npy"]) | hostile)


# -- the experiment spec of `environment: local` (gesscale/experiment/spec.py) ----------------------------------
LOCAL_BASE: dict[str, Any] = {
    "name": "fuzz-live", "environment": "local", "policies": ["gesscale", "static"],
    "local": {"day_s": 150, "nodes": 6, "node_cpu": 0.25, "control_period_s": 10, "warmup_s": 10},
    "sim_policies": ["gesscale"], "repeats": 2, "compare": [["gesscale", "static"]], "order_seed": 7,
}
LOCAL_EXTRA = [("local", k) for k in ("strategy", "rides_per_day", "peak_load", "start_hour", "drain_timeout_s",
                                      "query", "wan", "site", "port_shift")] + [("latency_map",)]
POLICY_PAIRS = st.sampled_from([["gesscale", "static"], ["static", "gesscale"], ["gesscale", "gesscale"],
                                ["gesscale", "nope"], ["gesscale"], [["gesscale"], "static"], "gesscale,static",
                                [{"a": 1}, "static"], ["x" * 3000, "static"]])


@st.composite
def local_specs(draw: st.DrawFn) -> dict[str, Any]:
    """`environment: local` specs: the `local:` keys (DemoOptions), repeats, compare, order_seed, latency_map."""
    doc = draw(mutated(LOCAL_BASE, LOCAL_EXTRA))
    if draw(st.booleans()):
        doc["compare"] = draw(st.lists(POLICY_PAIRS, max_size=3) | hostile)
    if draw(st.integers(0, 3)) == 0:
        doc["latency_map"] = draw(st.sampled_from(["map.yaml", "MISSING.yaml", "", "x" * 5000]) | hostile)
    return doc


# -- GESSCALE_* environment variables (gesscale/brokers/security.py, the job's token) ---------------------------
# Values as the environment can hold them: any text but NUL, undecodable bytes arrive as lone surrogates.
ENV_TEXTS = (st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20)
             | st.sampled_from(["", " ", "1", "0", "true", "yes", "TRUE", "ssl", "SASL_SSL", " SSL", "sasl_ssl\n",
                                "ſsl", "plaın", "ﬁle", "\udcff", "a\nb", "x" * 5000, "é", "\u202e", "\t"]))
# File roles the env strategy may name (the test maps each to a real path: see `env_files`).
ENV_FILE_ROLES = ["ok", "ok", "cert", "missing", "dir", "fifo", "/dev/zero", "/dev/null", "binary", "nul", "crlf",
                  "empty", "huge", "unreadable"]
KAFKA_VARS = ["SECURITY_PROTOCOL", "SASL_MECHANISM", "USERNAME", "PASSWORD", "PASSWORD_FILE", "CA_FILE",
              "CERT_FILE", "KEY_FILE"]
MQTT_VARS = ["TLS", "USERNAME", "PASSWORD", "PASSWORD_FILE", "CA_FILE", "CERT_FILE", "KEY_FILE"]


@st.composite
def env_settings(draw: st.DrawFn, kind: str) -> dict[str, str]:
    """`GESSCALE_KAFKA_*` or `GESSCALE_MQTT_*` variables; a file variable holds a role (`@ok`, `@fifo`, ...) that
    the test replaces by a path, or any text."""
    names = KAFKA_VARS if kind == "KAFKA" else MQTT_VARS
    choices = {
        "SECURITY_PROTOCOL": st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "sasl_ssl"]),
        "SASL_MECHANISM": st.sampled_from(["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "plain", "GSSAPI"]),
        "TLS": st.sampled_from(["1", "0", "true", "no", "on"]),
        "USERNAME": st.sampled_from(["alice", "bob"]),
        "PASSWORD": st.sampled_from(["pw-SECRET-1", "hunter2-SECRET"]),
    }
    env = {}
    for name in draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names))):
        if name.endswith("FILE") and draw(st.integers(0, 4)):
            value = "@" + draw(st.sampled_from(ENV_FILE_ROLES))
        elif name in choices and draw(st.booleans()):
            value = draw(choices[name])
        else:
            value = draw(ENV_TEXTS)
        env[f"GESSCALE_{kind}_{name}"] = value
    return env


# -- an Ansible inventory file (netem/hosts.py `load_inventory`) --------------------------------------------------
INVENTORY_BASE: dict[str, Any] = {
    "all": {
        "vars": {"ansible_user": "pi", "netem_device": "eth0", "ansible_become": True},
        "children": {"fog": {"hosts": {"pi01": {"ansible_host": "10.0.0.1"},
                                       "pi02": {"ansible_host": "10.0.0.2", "ansible_port": 22}}}},
    },
}
# Templates: the allowed forms, and forms that would run something on this machine if evaluated (the sentinel
# text 'EVALUATED' only appears if one was).
TEMPLATES = ["{{ inventory_dir }}/key", "{{ lookup('ansible.builtin.env', 'HOME') }}", "{{ ssh_known_hosts_file }}",
             "{{ 'EVAL' ~ 'UATED' }}", "{{ lookup('pipe', 'echo EVAL''UATED') }}", "{% if true %}EVAL{% endif %}UATED",
             "{{ 7 * 7 }}", "{{", "{# x #}", "{{ inventory_dir }}\n{{ 'EVAL' ~ 'UATED' }}"]
INVENTORY_EXTRA = [("all", "vars", k) for k in ("ansible_ssh_private_key_file", "netem_address", "netem_python",
                                                "ssh_known_hosts_file", "ansible_connection")]


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, Any]:
    """Inventory documents: hostile values and templates in host variables, host and group names added."""
    doc = draw(mutated(INVENTORY_BASE, INVENTORY_EXTRA))
    for _ in range(draw(st.integers(0, 2))):
        host = draw(st.sampled_from(["pi01", "pi02"]))
        hosts: Any = doc
        for key in ("all", "children", "fog", "hosts"):
            hosts = hosts.get(key) if isinstance(hosts, dict) else None
        if isinstance(hosts, dict) and isinstance(hosts.get(host), dict):
            key = draw(st.sampled_from(["ansible_host", "ansible_user", "ansible_ssh_private_key_file",
                                        "netem_device", "ansible_port"]))
            hosts[host][key] = draw(st.sampled_from(TEMPLATES))
    return doc
