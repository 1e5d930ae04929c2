"""Every controller option in one place: name, default and a one-line description.

The CLI, the docs table (`gesscale options`) and the policies read the same object, so a default is written
once. Options specific to one policy live as keyword arguments of that policy's class, documented there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from gesscale.errors import UserError


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass
class ControllerConfig:
    """Options of the MAPE loop and of the shared parts of the policies."""

    control_period_s: float = _opt(60.0, "Length of one Monitor-Analyze-Plan-Execute period (s).")
    warmup_s: float = _opt(
        180.0, "After a reconfiguration, no decision is taken for this long (s); covers the pause and settling."
    )
    min_replicas: int = _opt(1, "Fewest replicas (n_min).")
    max_replicas: int = _opt(8, "Most replicas (n_max); also capped by the schedulable nodes.")
    bp_high: float = _opt(0.5, "Back-pressure ratio above which a period counts as back-pressured (Algorithm 1).")
    dt_threshold_pct: float = _opt(
        20.0, "Trshld_DT: scale down only when DT = 100 (MST_n - CT) / MST_n reaches this (Algorithm 4)."
    )
    scale_down_margin: float = _opt(
        0.05, "Keep the predicted MST of the smaller configuration at least this fraction above the input."
    )
    cpu_high: float = _opt(0.9, "Threshold baselines: CPU above this adds one replica.")
    cpu_low: float = _opt(0.5, "Threshold baselines: CPU below this removes one replica.")
    recommend_only: bool = _opt(False, "Decide and report, but change nothing (dry run).")
    seed: int = _opt(1, "Seed of every random choice (random placement, simulator noise).")

    def __post_init__(self) -> None:
        if self.control_period_s <= 0:
            raise UserError("control period must be positive")
        if self.min_replicas < 1:
            raise UserError("min_replicas must be at least 1")
        if self.max_replicas < self.min_replicas:
            raise UserError(f"max_replicas ({self.max_replicas}) < min_replicas ({self.min_replicas})")
        if not 0 <= self.cpu_low < self.cpu_high <= 1:
            raise UserError("need 0 <= cpu_low < cpu_high <= 1")

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str]]:
        """(name, default, help) of every option, for docs and `--help`."""
        return [(f.name, f.default, f.metadata.get("help", "")) for f in fields(cls)]
