"""Repeated live runs (`repeats` in an `environment: local` spec): the block schedule, one sizing of the day,
resuming an interrupted experiment, and the statistics, figure and tables of the bundle.

The live runner is what is being scheduled here, so a cheap stand-in takes the place of `run_demo` (a real live
run takes minutes and both cores: docs/experiments.md): it feeds the listeners the periods a run would and returns
a report of the demo's shape. Everything around it (plan, files, resume, statistics, report) is the real code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gesscale.errors import UserError
from gesscale.experiment.live import run_live_experiment
from gesscale.experiment.repeats import block_plan
from gesscale.experiment.replay import replay_live
from gesscale.experiment.spec import spec_from_dict
from tests.experiment.test_live_parts import _record

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ["gesscale", "mdl-nlunaware", "thr-nlaware"]
REPLICAS = {"gesscale": 2, "mdl-nlunaware": 3, "thr-nlaware": 3}


class StandIn:
    """In place of `run_demo(opts, say)`: records each call; `cut_at` interrupts that call part-way (as Ctrl-C
    would), after it wrote a file into its folder."""

    def __init__(self, cut_at: int | None = None) -> None:
        self.calls: list[tuple[str, int | None, str]] = []
        self.cut_at = cut_at

    def __call__(self, opts: Any, say: Any) -> dict[str, Any]:
        self.calls.append((opts.policy, opts.rides_per_day, opts.out.name))
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "testbed.log").write_text(f"run {opts.out.name}\n")
        if len(self.calls) == self.cut_at:
            raise KeyboardInterrupt
        probed = opts.rides_per_day is None
        if probed:  # run_demo sizes the day from its probe and keeps the figure in the options
            opts.rides_per_day = 4321
        block = int(opts.out.name.rsplit("-b", 1)[1])
        periods = []
        for i in range(6):  # one replica for two periods, then the policy's count
            record = _record(10.0 * (i + 1), REPLICAS[opts.policy] if i > 1 else 1, 100.0 + block, 1.0)
            for listener in opts.listeners:
                listener(record, None)
            periods.append({"time_s": 10.0 * (i + 1), "period_s": 10.0, "replicas": list(record.observation.replicas),
                            "backlog": 0.0, "extra": {"input_total": 100 * (i + 1)}})
        return {"produced": 600, "processed": 600, "lost": 0, "duplicated": 0, "calibrated_scenario": _twin(opts),
                "periods": periods,
                "reconfigurations": [{"pause_s": 10.0}] * (1 + block % 2),
                "load": {"rides_per_day": opts.rides_per_day, "chosen": "probe" if probed else "given"},
                "options": {"control_period_s": 10.0}, "network": {"emulated": False}}


def _twin(opts: Any) -> dict[str, Any]:
    """The simulated twin of a run as run_demo writes one (here of the recorded demo in tests/data)."""
    import json

    from gesscale.latency_map import load_latency_map
    from gesscale.twin import build_twin

    data = ROOT / "tests" / "data"
    periods = [json.loads(line) for line in (data / "live_demo_periods.jsonl").read_text().splitlines()]
    changes = [json.loads(line) for line in (data / "live_demo_reconfigurations.jsonl").read_text().splitlines()]
    model = {"fitted": True, "alpha": 300.0, "beta": 0.8, "gamma": 1.0, "measurements": []}
    lmap = load_latency_map(ROOT / "inventory" / "latency" / "fog9.yaml").subset(["fog1", "fog2", "fog3"])
    return build_twin(periods, changes, model, lmap.to_dict(), 3, 10.0, 10.0)[0]


def _spec(**extra: Any) -> Any:
    return spec_from_dict({"environment": "local", "policies": POLICIES, "repeats": 3, "order_seed": 7,
                           "compare": [["gesscale", "mdl-nlunaware"]], "local": {"day_s": 150}, **extra},
                          "exp.yaml", ROOT)


def _on_disk(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_block_plan_is_a_seeded_shuffle_of_every_policy_per_block() -> None:
    plan = block_plan(POLICIES, 6, seed=7)
    assert len(plan) == 6 and all(sorted(b) == sorted(POLICIES) for b in plan)
    assert plan == block_plan(POLICIES, 6, seed=7)
    assert len({tuple(b) for b in plan}) > 1  # the order changes from block to block


def test_repeats_run_in_blocks_on_one_sized_day_with_statistics(tmp_path: Path) -> None:
    runner = StandIn()
    out = tmp_path / "b"
    run_live_experiment(_spec(), out, ["t"], say=lambda m: None, runner=runner)
    metrics = json.loads((out / "metrics.json").read_text())
    plan = metrics["plan"]
    assert plan["order_seed"] == 7 and plan["blocks"] == block_plan(POLICIES, 3, seed=7)
    # the runs went block by block in the recorded order
    assert [c[0] for c in runner.calls] == [p for block in plan["blocks"] for p in block]
    # the day was sized once, by the first run's probe, and given to every later run: one input for all
    assert [c[1] for c in runner.calls] == [None] + [4321] * 8 and plan["rides_per_day"] == 4321
    digests = {r["input"]["sha256_of_workload_spec"] for r in metrics["runs"].values()}
    assert len(metrics["runs"]) == 9 and len(digests) == 1
    stats = metrics["statistics"]
    # gesscale: 1+1+2+2+2+2 = 10 replica-periods of 10 s; mdl-nlunaware: 1+1+3+3+3+3 = 14 -> -40/60 per block
    # (the input runs from 0 to 60 s and the backlog is 0 at every period, so the run completes at 60 s)
    g = stats["per_policy"]["gesscale"]["replica_minutes"]
    assert g["value"] == pytest.approx(10 / 6) and g["n"] == 3
    pair = stats["pairs"][0]
    assert (pair["a"], pair["b"], pair["blocks"]) == ("gesscale", "mdl-nlunaware", [1, 2, 3])
    rm = pair["metrics"]["replica_minutes"]
    assert rm["mean_difference"]["value"] == pytest.approx(-4 / 6) and rm["p_value"] == pytest.approx(0.25)
    assert pair["metrics"]["reconfigurations"]["differences"] == [0.0, 0.0, 0.0]
    page = (out / "report.html").read_text()
    assert 'data-table="repeats"' in page and 'data-table="pairs"' in page and 'alt="repeats.png"' in page
    assert "percentile bootstrap" in page and "sign-flip" in page
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) | {"manifest.json"} == _on_disk(out)
    assert "live/gesscale-b1/testbed.log" in manifest["files"] and not (out / "progress.json").exists()
    # the replay runs every run's simulated twin, named by its run
    doc = replay_live(out, [], tmp_path / "replay", seeds=1)
    assert sorted(doc["twins"]) == sorted(metrics["runs"])
    assert set(doc["twins"]["mdl-nlunaware-b2"]["simulated"]) == {"mdl-nlunaware"}


def test_an_interrupted_experiment_resumes_where_it_stopped(tmp_path: Path) -> None:
    out = tmp_path / "b"
    cut = StandIn(cut_at=5)
    with pytest.raises(KeyboardInterrupt):
        run_live_experiment(_spec(), out, ["t"], say=lambda m: None, runner=cut)
    progress = json.loads((out / "progress.json").read_text())
    done = progress["completed"]
    assert len(done) == 4 and sorted(p.name for p in (out / "runs").iterdir()) == sorted(f"{r}.json" for r in done)
    interrupted = cut.calls[-1][2]
    assert progress["running"] == f"live/{interrupted}"
    with pytest.raises(UserError, match="is not empty"):
        run_live_experiment(_spec(), out, ["t"], say=lambda m: None, runner=StandIn())
    with pytest.raises(UserError, match="the experiment file changed"):
        run_live_experiment(_spec(repeats=4), out, ["t"], say=lambda m: None, runner=StandIn(), resume=True)
    again = StandIn()
    run_live_experiment(_spec(), out, ["t"], say=lambda m: None, runner=again, resume=True)
    # only the cut run and those after it ran again, all on the day the first run sized
    assert [c[2] for c in again.calls][0] == interrupted and len(again.calls) == 5
    assert {c[2] for c in again.calls}.isdisjoint(done) and all(c[1] == 4321 for c in again.calls)
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["runs"]) == 9 and metrics["statistics"]["pairs"][0]["blocks"] == [1, 2, 3]
    resumed = json.loads((out / "environment.json").read_text())["resumed"]
    assert len(resumed) == 1 and resumed[0]["runs_done_before"] == 4 and resumed[0]["git"]["commit"]
    assert set(json.loads((out / "manifest.json").read_text())["files"]) | {"manifest.json"} == _on_disk(out)


def test_force_clears_an_interrupted_experiment(tmp_path: Path) -> None:
    out = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):
        run_live_experiment(_spec(), out, ["t"], say=lambda m: None, runner=StandIn(cut_at=2))
    fresh = StandIn()
    run_live_experiment(_spec(), out, ["t"], say=lambda m: None, runner=fresh, force=True)
    assert len(fresh.calls) == 9 and fresh.calls[0][1] is None  # started over, sizing the day again


@pytest.mark.parametrize(("extra", "message"), [
    ({"repeats": 0}, "'repeats' must be"),
    ({"repeats": 21}, "'repeats' must be"),
    ({"compare": [["gesscale", "static"]]}, "compare: 'static' is not among the policies"),
    ({"compare": [["gesscale", "gesscale"]]}, "a pair needs two different policies"),
    ({"compare": ["gesscale"]}, "'compare' must be a list of pairs"),
    ({"repeats": 1}, "'compare' needs 'repeats' of at least 2"),
])
def test_repeat_keys_are_checked(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        _spec(**extra)


def test_repeats_are_for_live_runs_only() -> None:
    with pytest.raises(UserError, match="'repeats' is for environment: local .the simulator repeats with 'seeds'"):
        spec_from_dict({"scenario": "scenarios/pi10-spike.yaml", "policies": ["gesscale"], "repeats": 3},
                       "exp.yaml", ROOT)
