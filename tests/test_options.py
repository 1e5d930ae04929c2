"""Every controller and policy option is declared once (gesscale/options.py, docs/controller.md "Options"):
the commands' flags are generated from it with the same names and defaults, a scenario's `controller:` and
`policy_options:` take the same keys (strictly), policy options reach the policy, and `gesscale options` prints
the same table docs/controller.md holds."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from gesscale.cli import app, main
from gesscale.cli.controller_flags import controller_flags, flag_default
from gesscale.config import ENVIRONMENTS, ControllerConfig
from gesscale.errors import UserError
from gesscale.options import (
    controller_from_dict,
    controller_options,
    parse_duration_text,
    parse_policy_option_args,
    policy_options,
)
from gesscale.policies.base import policy_ids
from gesscale.scenario import scenario_from_dict, with_controller
from gesscale.simulate import controller_config, run_once
from tests.test_scenario import BASE

ROOT = Path(__file__).resolve().parents[1]
# Each command that runs a controller and the environment whose defaults it takes.
COMMANDS = {("simulate",): "sim", ("compare",): "sim", ("run",): "testbed", ("demo",): "demo",
            ("k8s", "run"): "k8s"}


def _command(path: tuple[str, ...]) -> Any:
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return cmd


@pytest.mark.parametrize("path,env", list(COMMANDS.items()), ids=[" ".join(p) for p in COMMANDS])
def test_each_command_takes_the_declared_flags_with_the_declared_defaults(path: tuple[str, ...], env: str) -> None:
    params = {p.name: p for p in _command(path).params}
    for spec in controller_options(env):
        param = params[spec.name]
        assert param.opts[0] == spec.flag, spec.name
        assert param.default == flag_default(spec, env), spec.name
        if env != "sim":  # the value the command runs with is the declared one for its environment
            value = spec.parse(param.default, "t") if isinstance(param.default, str) else param.default
            assert value == spec.default_for(env), spec.name
    assert params["policy_option"].opts == ["--policy-option"]
    declared = {s.name for s in controller_options(env)}
    flags = {s.flag for s in controller_options()}
    for name, param in params.items():  # no other parameter re-declares a controller flag under its own name
        if name not in declared:
            assert not set(param.opts) & flags, name


def test_the_flag_names_are_the_same_in_every_command() -> None:
    names = {env: {s.name: s.flag for s in controller_options(env)} for env in ENVIRONMENTS}
    for env, flags in names.items():
        for name, flag in flags.items():
            assert flag == "--" + name.removesuffix("_s").replace("_", "-"), (env, name)
    # recommend_only: live only; latency_source, model_latency: the simulator and the local testbed (run, demo), not
    # k8s run (the measurement from the nodes of a cluster is not built; a cluster has no site known to it)
    assert names["sim"].keys() < names["testbed"].keys() == names["demo"].keys()
    assert names["testbed"].keys() - {"latency_source", "model_latency"} == names["k8s"].keys()
    assert "latency_source" not in names["k8s"] and "latency_source" in names["sim"]
    assert "model_latency" not in names["k8s"] and "model_latency" in names["sim"]


def test_defaults_that_differ_per_environment_are_declared() -> None:
    period = next(s for s in controller_options() if s.name == "control_period_s")
    assert period.default == ControllerConfig().control_period_s == 60.0
    assert period.default_for("testbed") == period.default_for("demo") == 10.0
    assert period.default_for("k8s") == 60.0


def test_k8s_run_keeps_its_former_flag_names() -> None:
    params = {p.name: p.opts for p in _command(("k8s", "run")).params}
    assert params["control_period_s"] == ["--control-period", "--period"]
    assert params["min_replicas"] == ["--min-replicas", "--min"]
    assert params["max_replicas"] == ["--max-replicas", "--max"]


def test_calibrate_seed_is_the_declared_one() -> None:
    seed = {p.name: p for p in _command(("calibrate",)).params}["seed"]
    assert seed.opts == ["--seed"] and seed.default == ControllerConfig().seed


def test_the_generated_flags_reach_the_command_checked_and_converted() -> None:
    got: dict[str, Any] = {}
    demo_app = typer.Typer()

    @demo_app.command()
    @controller_flags("testbed")
    def cmd(name: str = typer.Option("x", "--name"), controller: dict[str, Any] | None = None,
            policy_option_args: list[str] | None = None) -> None:
        got.update(name=name, controller=controller, policy=policy_option_args)

    result = CliRunner().invoke(demo_app, ["--control-period", "2m", "--warmup", "0", "--max-replicas", "3",
                                           "--recommend-only", "--policy-option", "replicas=2"])
    assert result.exit_code == 0, result.output
    assert got["controller"]["control_period_s"] == 120.0 and got["controller"]["warmup_s"] == 0.0
    assert got["controller"]["max_replicas"] == 3 and got["controller"]["recommend_only"] is True
    assert got["controller"]["min_replicas"] == 1 and got["policy"] == ["replicas=2"]
    assert ControllerConfig(**got["controller"]).control_period_s == 120.0


@pytest.mark.parametrize("argv,message", [
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--warmup", "soon"], "not a duration"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--bp-high", "2"], "'bp_high' must be in [0, 1]"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--max-replicas", "40"], "exceeds the 10 nodes"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "-p", "static", "--policy-option", "size=3"],
     "no policy among static has an option 'size'"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "-p", "static", "--policy-option", "ds2.x=3"],
     "policy 'ds2' is not among the policies run"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "-p", "static", "--policy-option", "replicas"],
     "expected KEY=VALUE"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "-p", "keda-lag", "--policy-option", "lag_threshold=0"],
     "'lag_threshold' must be in (0, 1e+09], got 0"),
    (["compare", "-s", "scenarios", "-p", "static", "--policy-option", "replicas=x"], "must be a whole number"),
    (["run", "--policy", "static", "--policy-option", "nope=1"], "no policy among static has an option 'nope'"),
    (["run", "--cpu-low", "0.95"], "cpu_low < cpu_high"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--model-form", "cubic"],
     "'model_form' must be one of paper, auto, per-replica, proportional, per-batch"),
    (["simulate", "-s", "scenarios/pi10-taxi.yaml", "--latency-source", "probes"],
     "'latency_source' must be one of map, measured, both, got 'probes'"),
    (["compare", "-s", "scenarios", "--latency-source", "Map"], "'latency_source' must be one of map, measured"),
    (["k8s", "run", "--hook-url", "http://x", "--latency-source", "measured"], "No such option: --latency-source"),
    (["run", "--latency-source", "probes"], "'latency_source' must be one of map, measured, both, got 'probes'"),
    (["demo", "--latency-source", "Both", "--out", "/nonexistent/gesscale-demo"],
     "'latency_source' must be one of map, measured, both, got 'Both'"),
    (["k8s", "run", "--hook-url", "http://x", "--policy", "static", "--policy-option", "replicas=-1"],
     "'replicas' must be in [1, 1e+06]"),
])
def test_bad_options_are_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gesscale: error:") and "\n" not in err and message in err, err


def test_durations_take_numbers_and_units() -> None:
    assert parse_duration_text("10", "t") == 10.0
    assert parse_duration_text("10s", "t") == 10.0
    assert parse_duration_text("1.5m", "t") == 90.0
    assert parse_duration_text("1h", "t") == 3600.0
    assert parse_duration_text("500ms", "t") == 0.5
    with pytest.raises(UserError):
        parse_duration_text("ten", "t")


def test_every_policy_option_has_help_and_a_default_in_range() -> None:
    from gesscale.options import _policy_class

    for pid in policy_ids():
        specs = policy_options(pid)
        helps: dict[str, str] = {}
        for base in _policy_class(pid).__mro__:
            helps.update(getattr(base, "option_help", None) or {})
        assert set(helps) <= {s.name for s in specs} | set(), (pid, set(helps) - {s.name for s in specs})
        for spec in specs:
            assert spec.help, (pid, spec.name)
            assert spec.check(spec.default, pid) == spec.default, (pid, spec.name)
    for spec in controller_options():
        assert spec.help and spec.check(spec.default, "controller") == spec.default, spec.name
    assert {s.name for s in policy_options("static")} == {"replicas"}
    assert "dt_threshold_pct" in {s.name for s in controller_options("sim")}


def test_policy_option_args_go_to_the_policies_that_declare_them() -> None:
    got = parse_policy_option_args(["stabilization_s=2m", "keda-lag.partitions=none", "hpa-cpu.target=0.5"],
                                   ["hpa-cpu", "keda-lag", "static"])
    assert got == {"hpa-cpu": {"stabilization_s": 120.0, "target": 0.5},
                   "keda-lag": {"stabilization_s": 120.0, "partitions": None}}
    assert parse_policy_option_args(["defer=no"], ["gesscale-plus"]) == {"gesscale-plus": {"defer": False}}


def _doc(**extra: Any) -> dict[str, Any]:
    """The schema test's scenario without the period and bounds at their historical places (their defaults are
    the same), so that `controller:` may give them."""
    doc = copy.deepcopy(BASE)
    del doc["control_period_s"], doc["cluster"]["min_replicas"], doc["cluster"]["max_replicas"]
    doc.update(extra)
    return doc


def test_a_scenario_takes_controller_and_policy_options() -> None:
    sc = scenario_from_dict(_doc(controller={"warmup_s": "2m", "dt_threshold_pct": 30, "max_replicas": 0},
                                 policy_options={"static": {"replicas": 3}}), "f.yaml")
    assert sc.warmup_s == 120.0 and sc.max_replicas == 3  # 0: every node of the map
    assert sc.controller == {"dt_threshold_pct": 30.0}
    cfg = controller_config(sc, seed=1)
    assert cfg.dt_threshold_pct == 30.0 and cfg.warmup_s == 120.0
    assert sc.policy_options == {"static": {"replicas": 3}}


@pytest.mark.parametrize("extra,message", [
    ({"controller": {"warmup": 10}}, "f.yaml: controller: unknown key 'warmup'"),
    ({"controller": {"recommend_only": True}}, "f.yaml: controller: unknown key 'recommend_only'"),
    ({"controller": {"cpu_high": 1.5}}, "f.yaml: controller: 'cpu_high' must be in [0, 1]"),
    ({"controller": {"cpu_low": 0.95}}, "f.yaml: controller: need 0 <= cpu_low < cpu_high <= 1"),
    ({"controller": {"control_period_s": 0.5}}, "'control_period_s' must be >= 1 in the simulator"),
    ({"controller": {"min_replicas": 3}}, "operator.initial_replicas (2) outside"),
    ({"controller": [1]}, "f.yaml: controller must be a mapping"),
    ({"policy_options": {"static": {"size": 3}}}, "f.yaml: policy_options.static: unknown key 'size'"),
    ({"policy_options": {"nope": {}}}, "unknown policy 'nope'"),
    ({"policy_options": {"static": {"replicas": 2.5}}}, "'replicas' must be a whole number"),
    ({"policy_options": {"gesscale": {"model": 1}}}, "policy 'gesscale' has no options"),
    ({"policy_options": ["static"]}, "'policy_options' must be a mapping"),
])
def test_a_scenario_refuses_bad_controller_and_policy_options(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as err:
        scenario_from_dict(_doc(**extra), "f.yaml")
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_controller_option_given_twice_is_refused() -> None:
    doc = copy.deepcopy(BASE)
    with pytest.raises(UserError, match="'control_period_s' is given twice"):
        scenario_from_dict({**doc, "controller": {"control_period_s": 30}}, "f.yaml")
    with pytest.raises(UserError, match="'max_replicas' is given twice, as controller.max_replicas and as "
                                        "cluster.max_replicas"):
        scenario_from_dict({**doc, "controller": {"max_replicas": 2}}, "f.yaml")


def test_scenario_policy_options_reach_the_policy_and_explicit_ones_win() -> None:
    sc = scenario_from_dict(_doc(policy_options={"static": {"replicas": 3}}), "f.yaml")
    seen: list[Any] = []
    run_once(sc, "static", 1, on_step=lambda record, policy: seen.append(policy))
    assert seen[0].replicas == 3
    seen.clear()
    result = run_once(sc, "static", 1, policy_options={"replicas": 1}, on_step=lambda r, p: seen.append(p))
    assert seen[0].replicas == 1 and result.metrics.avg_replicas < 1.5


def test_command_line_controller_options_replace_the_scenarios() -> None:
    sc = scenario_from_dict(_doc(controller={"bp_high": 0.7}), "f.yaml")
    sc2 = with_controller(sc, {"control_period_s": 30.0, "bp_high": 0.6, "seed": 5})
    assert (sc2.control_period_s, sc2.seed, sc2.controller) == (30.0, 5, {"bp_high": 0.6})
    assert with_controller(sc, {}) is sc


def test_simulate_policy_option_changes_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.json"
    assert main(["simulate", "-s", "scenarios/pi10-taxi.yaml", "-p", "static", "--policy-option", "replicas=4",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert abs(doc["policies"]["static"]["avg_replicas"] - 4) < 0.1


def test_controller_from_dict_refuses_what_another_environment_takes() -> None:
    assert controller_from_dict({"recommend_only": True}, "x", env="k8s") == {"recommend_only": True}
    with pytest.raises(UserError, match="unknown key 'recommend_only'"):
        controller_from_dict({"recommend_only": True}, "x", env="sim")


def test_gesscale_options_prints_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["options", "--markdown"]) == 0
    out = capsys.readouterr().out
    for spec in controller_options():
        assert f"| `{spec.name}` |" in out
    for pid in ("static", "gesscale-plus", "hpa-cpu", "keda-lag"):
        assert f"**policy {pid}**" in out
        for spec in policy_options(pid):
            assert f"| `{spec.name}` | {spec.show(spec.default)} |" in out
    assert "| `control_period_s` | 60s (run: 10s; demo: 10s) |" in out
    assert main(["options"]) == 0
    assert "delay_budget_s" in capsys.readouterr().out
