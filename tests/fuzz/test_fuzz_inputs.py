"""Every input schema fuzzed by property (issue 28): for any document, valid or not, the loader returns a value
inside the declared ranges or raises one `UserError` line of bounded length; never another exception, never a
hang or a runaway allocation (each example is capped: `tests.fuzz.caps`).

Schemas: scenario (as a mapping and as YAML text with aliases), latency map, inventory host variables,
experiment spec, controller state file, rate CSV, bundle spec, policy plug-in, and any YAML text through both
loaders (the C loader and the pure-Python one agree).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import event, example, given
from hypothesis import strategies as st

from gesscale.errors import UserError, one_line
from tests.fuzz import strategies as s
from tests.fuzz.caps import capped

# A value is quoted at about 80 characters (`brief`), any word of the printed line at 160 (`one_line`); a path and
# a list of known keys come beside it.
MAX_LINE = 600
_counter = itertools.count()


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", value) or ("error", message); any exception other than `UserError` fails the example."""
    with capped():
        try:
            value = fn()
        except UserError as err:
            message = one_line(str(err))  # as the CLI prints it
        else:
            event("accepted")  # `--hypothesis-show-statistics` gives the share of valid and refused documents
            return "ok", value
    event("refused")
    assert "\n" not in message, message[:500]
    assert len(message) < MAX_LINE, message[:500]
    assert "Traceback" not in message
    return "error", message


def _within(value: float, lo: float, hi: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and lo <= value <= hi


def check_scenario(sc: Any) -> None:
    """A scenario that loaded holds no value outside its declared range (no nonsense accepted)."""
    from gesscale.config import MAX_SEED
    from gesscale.workloads import MAX_WORKLOAD_S, workload_duration_s

    t = sc.truth
    assert _within(sc.control_period_s, 1, 86400)
    assert sc.warmup_s is None or _within(sc.warmup_s, 0, 86400)
    assert _within(t.reconfig_pause_s, 0, 3600) and _within(t.alpha, 0, 1e9) and _within(t.beta, 0, 4)
    assert t.alpha > 0 and t.beta > 0  # open lower ends
    assert _within(t.gamma, 0, 1e9) and _within(t.noise, 0, 0.999999)
    for n in (1, sc.max_replicas):  # every form of the ground truth gives a finite MST of at least 0
        assert _within(t.mst(n, sc.latency_map.nd_max(sc.latency_map.names)), 0, math.inf)
    assert 1 <= sc.min_replicas <= t.initial_replicas <= sc.max_replicas <= len(sc.latency_map.names)
    assert _within(sc.seed, 0, MAX_SEED)
    for timing in (getattr(t, "reconfig", None) or {}).values():  # the twin's measured timing, consistent
        assert _within(timing.pause_s, 0, 3600) and _within(timing.effective_s, timing.pause_s, 3600)
        assert timing.observation_gap_s is None or _within(timing.observation_gap_s, timing.effective_s, 3600)
    for key, value in sc.workload.items():
        if key not in ("kind", "path", "levels"):
            assert isinstance(value, int | float) and math.isfinite(value), (key, value)
    assert workload_duration_s(sc.workload) <= MAX_WORKLOAD_S
    for name, value in sc.controller.items():
        assert not isinstance(value, float) or math.isfinite(value), (name, value)
    assert sc.controller.get("latency_source", "map") in ("map", "measured", "both")


@given(s.scenarios())
def test_fuzz_scenario(data: dict[str, Any]) -> None:
    from gesscale.scenario import scenario_from_dict

    kind, value = outcome(lambda: scenario_from_dict(data, "fuzz.yaml"))
    if kind == "ok":
        check_scenario(value)


@given(data=st.data())
def test_fuzz_scenario_yaml(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """The same documents as YAML files, with aliases, bombs, deep nesting, tabs."""
    from gesscale.scenario import load_scenario

    text = data.draw(s.yaml_with_aliases(data.draw(s.scenarios())))
    path = tmp_path_factory.mktemp("yaml") / f"s{next(_counter)}.yaml"
    path.write_text(text)
    (path.parent / "map.yaml").write_text(yaml.safe_dump(s.MAP))
    kind, value = outcome(lambda: load_scenario(path))
    if kind == "ok":
        check_scenario(value)


@given(s.latency_maps())
def test_fuzz_latency_map(data: dict[str, Any]) -> None:
    from gesscale.latency_map import MAX_RTT_MS, latency_map_from_dict

    kind, lmap = outcome(lambda: latency_map_from_dict(data, "map.yaml"))
    if kind == "ok":
        for a, b in itertools.combinations(lmap.names, 2):
            assert _within(lmap.rtt(a, b), 0, MAX_RTT_MS)
        for node in lmap.nodes.values():
            assert node.lat is None or _within(node.lat, -90, 90)
            assert node.lon is None or _within(node.lon, -180, 180)


@given(st.dictionaries(st.sampled_from(["ansible_host", "netem_address", "ansible_port", "ansible_user",
                                        "netem_device", "ansible_become", "ansible_connection", "netem_python",
                                        "ansible_ssh_private_key_file", "ssh_known_hosts_file"]),
                       s.hostile | st.sampled_from(["10.0.0.1", "fe80::1%eth0", "fe80::1%x\ny", "eth0", "22"]),
                       max_size=6),
       s.texts | st.sampled_from(["pi01", "pi 01", "pi01\nrm"]))
def test_fuzz_inventory_host(hostvars: dict[str, Any], name: str) -> None:
    """An inventory host's variables (what netem and the playbooks read of an Ansible inventory)."""
    from netem.hosts import host_from_vars

    kind, host = outcome(lambda: host_from_vars(name, hostvars))
    if kind == "ok":
        assert 1 <= host.port <= 65535


@given(data=s.inventories())
def test_fuzz_inventory_file(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]) -> None:
    """A whole inventory file, as `netem plan` reads it: hosts with valid names and values, or one line; no
    template other than the allowed forms is ever evaluated."""
    from gesscale.names import is_name
    from netem.hosts import load_inventory

    path = tmp_path_factory.mktemp("inv") / "hosts.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    kind, hosts = outcome(lambda: load_inventory(path))
    if kind == "ok":
        for name, host in hosts.items():
            assert is_name("host", name), name
            assert "EVALUATED" not in repr(host) and "49" not in str(host.address), host
            assert 1 <= host.port <= 65535


@given(data=s.experiment_specs())
@example(data={"scenario": "s.yaml", "policies": ["static"], "control_period_s": 1e300})  # was taken (no upper end)
def test_fuzz_experiment_spec(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]) -> None:
    from gesscale.experiment.spec import spec_from_dict

    base = tmp_path_factory.getbasetemp() / "spec"
    base.mkdir(exist_ok=True)
    (base / "s.yaml").write_text(yaml.safe_dump(s.base_scenario("steps")))
    kind, spec = outcome(lambda: spec_from_dict(data, "x.yaml", base))
    if kind == "ok":
        from gesscale.experiment.spec import MAX_SEEDS

        assert 1 <= spec.seeds <= MAX_SEEDS and spec.policies
        assert spec.control_period_s is None or _within(spec.control_period_s, 1, 86400), spec.control_period_s


@given(s.state_texts())
def test_fuzz_state_file(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    from gesscale.state_file import read_state

    path = tmp_path_factory.mktemp("state") / "controller.json"
    path.write_text(text, errors="surrogatepass")
    kind, state = outcome(lambda: read_state(path))
    if kind == "ok":
        assert state is None or isinstance(state, dict)


@given(s.rate_csvs())
def test_fuzz_rate_csv(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    from gesscale.workloads import MAX_WORKLOAD_S, rate_profile, workload_duration_s

    path = tmp_path_factory.mktemp("csv") / "rates.csv"
    path.write_bytes(data)
    spec = {"kind": "csv", "path": str(path)}
    kind, n = outcome(lambda: workload_duration_s(spec))
    if kind == "ok":
        assert 1 <= n <= MAX_WORKLOAD_S + 1
        kind, rates = outcome(lambda: rate_profile(spec, duration_s=min(n, 600)))
        assert kind == "error" or all(math.isfinite(r) and r >= 0 for r in rates)


@given(files=s.bundles())
# Found and fixed (each was taken before): a name that is no name (-1, '../x'), 10^308 seeds, a period of NaN.
@example(files=(json.dumps({**s.BUNDLE_SPEC, "name": "../x"}), json.dumps(s.BUNDLE_MANIFEST)))
@example(files=(json.dumps({**s.BUNDLE_SPEC, "seeds": 1e308}), json.dumps(s.BUNDLE_MANIFEST)))
@example(files=(json.dumps({**s.BUNDLE_SPEC, "control_period_s": math.nan}), json.dumps(s.BUNDLE_MANIFEST)))
def test_fuzz_bundle(tmp_path_factory: pytest.TempPathFactory, files: tuple[str, str]) -> None:
    """A bundle to replay: its spec and manifest damaged, its carried files anywhere. An accepted one reads only
    files inside the bundle with the recorded hash, and holds only values a run may take."""
    import os

    from gesscale.experiment.manifest import sha256
    from gesscale.experiment.replay import spec_of_bundle
    from gesscale.names import is_name
    from gesscale.policies.base import policy_ids

    root = tmp_path_factory.mktemp("bundle")
    bundle = root / "b"
    (bundle / "inputs").mkdir(parents=True)
    scenario = bundle / "inputs" / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(s.base_scenario("steps")))
    (root / "outside.yaml").write_text(yaml.safe_dump(s.base_scenario("steps")))
    os.mkfifo(bundle / "inputs" / "fifo")
    (bundle / "inputs" / "link-out").symlink_to(root / "outside.yaml")
    spec_text, manifest_text = files
    (bundle / "spec.resolved.json").write_text(spec_text)
    (bundle / "manifest.json").write_text(manifest_text.replace("HASH", sha256(scenario)))
    kind, spec = outcome(lambda: spec_of_bundle(bundle))
    if kind == "ok":
        for path in (spec.scenario_path, spec.latency_map, spec.model):
            assert path is None or path.resolve().is_relative_to(bundle.resolve()), path
        assert isinstance(spec.seeds, int) and 1 <= spec.seeds <= 100, spec.seeds
        assert spec.control_period_s is None or _within(spec.control_period_s, 1, 86400), spec.control_period_s
        assert is_name("experiment", spec.name), spec.name
        assert set(spec.policies) <= set(policy_ids()), spec.policies


@given(s.plugins())
def test_fuzz_plugin(tmp_path_factory: pytest.TempPathFactory, source: str) -> None:
    from gesscale.policies.base import load_plugin

    path = tmp_path_factory.mktemp("plugin") / f"plugin{next(_counter)}.py"
    path.write_text(source)
    kind, pid = outcome(lambda: load_plugin(f"{path}:Fuzz"))
    if kind == "ok":
        assert pid == "fuzz-plugin"
        from gesscale.policies import base

        base._REGISTRY.pop(pid, None)  # the next example may define it again
        base._PLUGINS.clear()


@given(st.text(max_size=200) | s.nested().flatmap(s.yaml_with_aliases))
def test_fuzz_yaml_loaders_agree(text: str) -> None:
    """Any text: both loaders give the same value or the same error (class, problem, line)."""
    from gesscale.yamlfile import LOADERS, parse_yaml

    results = []
    for loader in LOADERS:
        with capped():
            try:
                results.append(("ok", repr(parse_yaml(text, loader=loader))))
            except yaml.YAMLError as err:
                mark = getattr(err, "problem_mark", None)
                results.append((type(err).__name__, getattr(err, "problem", None), getattr(mark, "line", None)))
            except ValueError as err:  # libyaml and PyYAML both refuse some characters outright
                results.append(("ValueError", str(err)[:40], None))
    assert all(r == results[0] for r in results), (text[:200], results)


def test_the_caps_stop_a_hang_and_a_runaway_allocation() -> None:
    """The caps themselves: an example that loops or allocates past 256 MB is stopped (so a bug fails)."""
    from tests.fuzz.caps import Hang

    with pytest.raises(Hang), capped(seconds=0.2):
        while True:
            pass
    with pytest.raises(MemoryError), capped():
        bytearray(512 * 2**20)



def _matrix_file(folder: Any, matrix: tuple[str, Any], ref: Any) -> Any:
    """Write the drawn matrix as `m.npy` in `folder`; the reference `rtt_matrix:` gives (relative to the folder)."""
    import os

    import numpy as np

    kind, content = matrix
    if kind == "array":
        np.save(folder / "m.npy", content, allow_pickle=False)
    else:
        (folder / "m.npy").write_bytes(content)
    if ref == "FIFO":
        os.mkfifo(folder / "p.npy")
        return "p.npy"
    if ref == "DIR":
        (folder / "d.npy").mkdir()
        return "d.npy"
    return "m.npy" if ref == "FILE" else ref


@given(matrix=s.rtt_matrices(), ref=s.matrix_refs(), tolerance=st.sampled_from([None, 0, 0.5, 1.0, -1, math.nan]))
# Found and fixed (each failed before): an empty file raised EOFError; a timedelta matrix (numpy counts it an
# integer) raised TypeError; a FIFO hung the load.
@example(matrix=("bytes", b""), ref="FILE", tolerance=None)
@example(matrix=("array", np.zeros((3, 3), dtype="timedelta64[us]")), ref="FILE", tolerance=None)
@example(matrix=("array", np.zeros((3, 3))), ref="FIFO", tolerance=None)
def test_fuzz_rtt_matrix(tmp_path_factory: pytest.TempPathFactory, matrix: tuple[str, Any], ref: Any,
                         tolerance: Any) -> None:
    """A latency map whose RTTs are a `.npy` matrix (`rtt_matrix:`): any dtype, shape, damaged cell or file."""
    from gesscale.latency_map import MAX_RTT_MS, latency_map_from_dict

    folder = tmp_path_factory.mktemp("npy")
    data: dict[str, Any] = {"nodes": ["a", "b", "c"], "rtt_matrix": _matrix_file(folder, matrix, ref)}
    if tolerance is not None:
        data["symmetry_tolerance_ms"] = tolerance
    kind, lmap = outcome(lambda: latency_map_from_dict(data, "map.yaml", base_dir=folder))
    if kind == "ok":
        for a, b in itertools.product(lmap.names, repeat=2):
            assert _within(lmap.rtt(a, b), 0, MAX_RTT_MS), (a, b, lmap.rtt(a, b))
            assert lmap.rtt(a, b) == lmap.rtt(b, a) and (a != b or lmap.rtt(a, b) == 0)


def check_local_spec(spec: Any) -> None:
    """An `environment: local` spec that loaded holds only values inside the declared ranges."""
    from gesscale.experiment.spec import MAX_REPEATS
    from gesscale.options import controller_option
    from gesscale.testbed.demo import LOCAL_RANGES

    assert 1 <= spec.repeats <= MAX_REPEATS and isinstance(spec.repeats, int)
    assert spec.order_seed is None or (isinstance(spec.order_seed, int) and 0 <= spec.order_seed < 2**32)
    for a, b in spec.compare:
        assert a != b and a in spec.policies and b in spec.policies
    assert not spec.compare or spec.repeats >= 2
    for key, value in spec.local.items():
        if key in LOCAL_RANGES:
            lo, hi, integer = LOCAL_RANGES[key]
            assert _within(value, lo, hi) and not isinstance(value, bool), (key, value)
            assert not integer or isinstance(value, int), (key, value)
    for key in ("control_period_s", "warmup_s"):
        if key in spec.local:
            opt = controller_option(key)
            assert _within(spec.local[key], opt.lo, opt.hi), (key, spec.local[key])
    assert isinstance(spec.local.get("wan", True), bool)
    assert spec.local.get("strategy", "live") in ("live", "restart")
    assert isinstance(spec.local.get("query", "q"), str) and isinstance(spec.local.get("site") or "s", str)
    assert spec.latency_map is None or spec.latency_map.is_file()


@given(data=s.local_specs())
# Found and fixed (each was taken before): ports beyond 65535, a day of 1e300 s, 2.5 nodes, a control period
# of 'abc', a query that is a number, wan: 'no' (a true string), strategy 'banana', `local: 0` as no options;
# a long `compare` value was quoted whole (a 1,000-character line).
@example(data={**s.LOCAL_BASE, "local": {"port_shift": 99999}})
@example(data={**s.LOCAL_BASE, "local": {"day_s": 1e300}})
@example(data={**s.LOCAL_BASE, "local": {"nodes": 2.5}})
@example(data={**s.LOCAL_BASE, "local": {"control_period_s": "abc"}})
@example(data={**s.LOCAL_BASE, "local": {"query": 5}})
@example(data={**s.LOCAL_BASE, "local": {"wan": "no"}})
@example(data={**s.LOCAL_BASE, "local": {"strategy": "banana"}})
@example(data={**s.LOCAL_BASE, "local": 0})
@example(data={**s.LOCAL_BASE, "compare": [["a " * 400, "static"]]})
def test_fuzz_local_spec(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]) -> None:
    """Experiment specs of `environment: local`: `local:` keys, repeats, compare, order_seed, latency_map."""
    from gesscale.experiment.spec import spec_from_dict

    base = tmp_path_factory.getbasetemp() / "local-spec"
    base.mkdir(exist_ok=True)
    (base / "map.yaml").write_text(yaml.safe_dump(s.MAP))
    kind, spec = outcome(lambda: spec_from_dict(data, "x.yaml", base))
    if kind == "ok":
        check_local_spec(spec)
