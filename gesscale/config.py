"""Every controller option in one place: name, type, default (per environment where one differs), bounds, help.

This dataclass is the one declaration: `gesscale.options` reads its fields to validate a scenario's `controller:`
section, to generate the CLI flags of `simulate`, `compare`, `run`, `k8s run` and `demo`
(`gesscale.cli.controller_flags`), and to print the table of `gesscale options`. The options of one policy are
the keyword arguments of that policy's constructor (`gesscale.options.policy_options`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from gesscale.errors import UserError
from gesscale.model import FORM_CHOICES
from gesscale.site_view import MODEL_LATENCIES

# Where the controller runs; a default may differ per environment (declared with `env=` below).
#   sim: `gesscale simulate` / `compare` (the scenario file's value, else the default)
#   testbed: `gesscale run` (the local fog testbed), demo: `gesscale demo`, k8s: `gesscale k8s run`
ENVIRONMENTS: dict[str, str] = {
    "sim": "simulate, compare",
    "testbed": "run",
    "demo": "demo",
    "k8s": "k8s run",
}
LIVE = ("testbed", "demo", "k8s")
# Upper bounds, so that every number has a range (a value outside it is refused, `gesscale options` shows it):
# a control period or warm-up of at most a day; as many replicas as the largest map has nodes
# (`gesscale.latency_map.MAX_NODES`); a seed up to a billion.
DAY_S = 86400.0
MAX_REPLICAS = 2000
MAX_SEED = 10**9
# What network the controller sees (`gesscale.measured_latency`, docs/events.md).
LATENCY_SOURCES = ("map", "measured", "both")


def _opt(default: Any, help: str, *, kind: str = "", lo: float | None = None, hi: float | None = None,
         lo_open: bool = False, env: dict[str, Any] | None = None, where: tuple[str, ...] = tuple(ENVIRONMENTS),
         choices: tuple[str, ...] = ()) -> Any:
    """A field with its declaration: help, kind (`duration` for seconds given as 10s/2m, `choice` for one of
    `choices`), bounds, the defaults that differ per environment (`env`) and the environments the option applies
    to (`where`)."""
    meta = {"help": help, "kind": kind, "lo": lo, "hi": hi, "lo_open": lo_open, "env": dict(env or {}),
            "where": where, "choices": tuple(choices)}
    return field(default=default, metadata=meta)


@dataclass
class ControllerConfig:
    """Options of the MAPE loop and of the shared parts of the policies."""

    control_period_s: float = _opt(
        60.0, "Length of one Monitor-Analyze-Plan-Execute period (s).", kind="duration", lo=0.0, lo_open=True, hi=DAY_S,
        env={"testbed": 10.0, "demo": 10.0},
    )
    warmup_s: float = _opt(
        180.0, "After a reconfiguration, no decision is taken for this long (s); covers the pause and settling.",
        kind="duration", lo=0.0, hi=DAY_S, env={"testbed": 20.0, "demo": 10.0},
    )
    min_replicas: int = _opt(1, "Fewest replicas (n_min).", lo=1, hi=MAX_REPLICAS)
    max_replicas: int = _opt(
        8, "Most replicas (n_max); also capped by the schedulable nodes; 0: every schedulable node.", lo=0,
        hi=MAX_REPLICAS,
        env={"testbed": 0, "demo": 0},
    )
    bp_high: float = _opt(0.5, "Back-pressure ratio above which a period counts as back-pressured (Algorithm 1).",
                          lo=0.0, hi=1.0)
    dt_threshold_pct: float = _opt(
        20.0, "Trshld_DT: scale down only when DT = 100 (MST_n - CT) / MST_n reaches this (Algorithm 4).",
        lo=0.0, hi=100.0,
    )
    scale_down_margin: float = _opt(
        0.05, "Keep the predicted MST of the smaller configuration at least this fraction above the input.", lo=0.0,
        hi=10.0,
    )
    cpu_high: float = _opt(0.9, "Threshold baselines: CPU above this adds one replica.", lo=0.0, hi=1.0)
    cpu_low: float = _opt(0.5, "Threshold baselines: CPU below this removes one replica.", lo=0.0, hi=1.0)
    move_threshold_ms: float = _opt(
        10.0, "Re-placement: when a used node's links degrade, move one replica (add the better node first, then "
        "remove the worse) if that lowers ND_max by more than this (ms); 10 ms is above RTT noise and below a "
        "degraded site (docs/events.md).", lo=0.0, hi=10_000.0,
    )
    latency_source: str = _opt(
        "map", "What network the controller sees (docs/events.md): map: the operator's latency map with its own "
        "changes (not an events file's link entries); measured: RTTs measured every period (the simulator samples "
        "them; on the local testbed, pings from inside each fog node through the WAN emulation), smoothed (median "
        "of 3: a change is seen within 2 periods); both: the map, each pair replaced by its measurement once it "
        "has one.", kind="choice",
        choices=LATENCY_SOURCES, where=("sim", "testbed", "demo"),
    )
    recommend_only: bool = _opt(False, "Decide and report, but change nothing (dry run).", where=LIVE)
    seed: int = _opt(1, "Seed of every random choice (random placement, simulator noise).", lo=0, hi=MAX_SEED)
    model_form: str = _opt(
        "paper", "Form of the performance model MST(n, ND_max) (docs/calibration.md); auto: the form with the "
        "smallest leave-one-out error once 5 configurations are measured, the paper's before.", kind="choice",
        choices=FORM_CHOICES, env={"testbed": "auto", "demo": "auto", "k8s": "auto"},
    )
    model_latency: str = _opt(
        "nd_max", "The latency the performance model takes and latency-aware placement minimises "
        "(docs/calibration.md): nd_max: the largest RTT among the replicas' nodes (the paper's); site: the largest "
        "RTT from a replica to the site, the node of the input broker and the job's driver (the testbed's WAN site, "
        "a scenario's cluster.site), which the live task times follow.", kind="choice",
        choices=MODEL_LATENCIES, where=("sim", "testbed", "demo"),
    )

    def __post_init__(self) -> None:
        if self.control_period_s <= 0:
            raise UserError("control period must be positive")
        if self.min_replicas < 1:
            raise UserError("min_replicas must be at least 1")
        if self.max_replicas and self.max_replicas < self.min_replicas:
            raise UserError(f"max_replicas ({self.max_replicas}) < min_replicas ({self.min_replicas})")
        if not 0 <= self.cpu_low < self.cpu_high <= 1:
            raise UserError("need 0 <= cpu_low < cpu_high <= 1")
        if self.model_form not in FORM_CHOICES:
            raise UserError(f"model_form must be one of {', '.join(FORM_CHOICES)}, got {self.model_form!r}")
        if self.model_latency not in MODEL_LATENCIES:
            raise UserError(f"model_latency must be one of {', '.join(MODEL_LATENCIES)}, got {self.model_latency!r}")
        if self.latency_source not in LATENCY_SOURCES:
            raise UserError(f"latency_source must be one of {', '.join(LATENCY_SOURCES)}, got {self.latency_source!r}")

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str]]:
        """(name, default, help) of every option, for docs and `--help`."""
        return [(f.name, f.default, f.metadata.get("help", "")) for f in fields(cls)]
