"""Light workload forecasters for the predictive policies. Pure, no I/O.

`HoltForecaster` (Daedalus): Holt's linear exponential smoothing (double exponential smoothing), a level and a
trend updated once per control period from the observed input rate; the forecast h seconds ahead is level +
trend · h / period. Chosen because it needs no history window, no training phase and O(1) state, and it follows
ramps (which a moving average lags behind) — the shapes of the seed workloads.

`RecentTrend` (gesscale-plus): the least-squares slope of the last few periods' rates, reported only when it is
significant (a t-test on the slope), so that noise is not taken for a trend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
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


@dataclass
class RecentTrend:
    """The input's trend over its last `window` periods, counted only when it stands out of the noise.

    A least-squares line through the last `window` rates; its slope (per period) is reported only when it is at
    least `t_min` standard errors from zero, else 0. gesscale-plus uses a falling one (issue 19): a fall that
    holds over ten periods lets it shrink early and ride the rest on the queue, while the jumps of a random input
    (whose slope has a wide error) leave its sizing on the period's rate.
    """

    window: int = 10
    t_min: float = 2.0
    rates: list[float] = field(default_factory=list)

    def update(self, value: float) -> RecentTrend:
        """Take one period's observed rate."""
        self.rates.append(float(value))
        del self.rates[: -max(1, self.window)]
        return self

    def slope(self) -> float:
        """The significant slope per period (0 with fewer than 4 rates, or when within t_min errors of 0)."""
        k = len(self.rates)
        if k < 4:
            return 0.0
        mean_x, mean_y = (k - 1) / 2, sum(self.rates) / k
        sxx = sum((i - mean_x) ** 2 for i in range(k))
        b = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(self.rates)) / sxx
        sse = sum((y - mean_y - b * (i - mean_x)) ** 2 for i, y in enumerate(self.rates))
        se = math.sqrt(sse / (k - 2) / sxx)
        return b if abs(b) >= self.t_min * se else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for `state_dict`)."""
        return {"window": self.window, "t_min": self.t_min, "rates": list(self.rates)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecentTrend:
        """Rebuild from `to_dict`."""
        return cls(window=int(data["window"]), t_min=float(data["t_min"]), rates=[float(r) for r in data["rates"]])
