"""A light workload forecaster for the predictive policies (Daedalus, gesscale-plus).

Holt's linear exponential smoothing (double exponential smoothing): a level and a trend, updated once per
control period from the observed input rate; the forecast h seconds ahead is level + trend · h / period.
Chosen because it needs no history window, no training phase and O(1) state, and it follows ramps (which a
moving average lags behind) — the shapes of the seed workloads. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class HoltForecaster:
    """Level/trend smoothing of a rate sampled once per period.

    `alpha` weighs the newest sample in the level, `beta` the newest level change in the trend (both in (0, 1]).
    """

    alpha: float = 0.5
    beta: float = 0.3
    level: float | None = None
    trend: float = 0.0
    samples: int = 0

    def update(self, value: float) -> HoltForecaster:
        """Take one period's observed rate."""
        if self.level is None:
            self.level, self.trend = float(value), 0.0
        else:
            previous = self.level
            self.level = self.alpha * value + (1 - self.alpha) * (self.level + self.trend)
            self.trend = self.beta * (self.level - previous) + (1 - self.beta) * self.trend
        self.samples += 1
        return self

    def forecast(self, periods_ahead: float) -> float:
        """Expected rate `periods_ahead` periods from now (never negative; 0 before the first sample)."""
        if self.level is None:
            return 0.0
        return max(0.0, self.level + self.trend * periods_ahead)

    def peak(self, periods_ahead: float) -> float:
        """The largest rate expected between now and `periods_ahead` periods (linear forecast: an endpoint)."""
        return max(self.forecast(0.0), self.forecast(periods_ahead))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for `state_dict`)."""
        return {"alpha": self.alpha, "beta": self.beta, "level": self.level, "trend": self.trend,
                "samples": self.samples}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HoltForecaster:
        """Rebuild from `to_dict`."""
        return cls(**data)
