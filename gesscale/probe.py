"""Capacity probe: measure a configuration's MST by controlled injection, then pre-calibrate the model.

Procedure (after StreamBed's controlled-injection search; Rosinosky et al., "StreamBed: capacity planning for
stream processing", DEBS 2024), for one configuration (a set of nodes):

1. warm-up: inject at the upper bound for `warmup_s` (caches, JIT, connections), then drain;
2. dichotomous search over target rates in [lo, hi]: for each rate, a cool-down (no input, drain the backlog),
   an injection phase of `inject_s` at the rate (reach steady state), then an observation phase of
   `observe_s` at the same rate;
3. a rate succeeds when, over the observation phase, the processed rate is within `tolerance` (1%) of the
   injected rate and the backlog does not grow: its least-squares trend over the phase adds up to at most
   `backlog_tolerance` of what was injected (default a tenth of `tolerance`, so that noise is not read as
   growth but an overload of more than ~0.1% is; a live target, whose micro-batches make the backlog move in
   steps of seconds of input, documents a larger one — gesscale/testbed/probe_target.py);
4. the search stops when (hi - lo) / hi < `precision` and some rate failed (or after `max_steps` rates); the
   MST is the highest successful rate (`bounded` false when no rate failed: then it is only a lower bound).
   A target may offer `expected_mst(nodes)`, a guess of where the MST lies (the live target measures the
   saturated throughput): midpoints are then taken in a bracket centred on the guess, whose floor
   is never a result; when nothing in the bracket is sustained the search falls back to [0, hi]. A rate that
   fails with a processed rate p short of it by more than `tolerance` saturated the operator at p: the bracket
   becomes [p (1 - 3 tolerance), min(rate, p (1 + tolerance))], the next rate p (1 - tolerance).

The confidence of a measurement is the relative spread (p95 - p5) / median of the per-second processed rate
over the observation phase of the last successful rate. The procedure only needs a `ProbeTarget`, so it runs
the same on the simulator (fast, exact ground truth) and on a live backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from gesscale import placement
from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.model import Measurement, PerformanceModel
from gesscale.scenario import GroundTruth


@dataclass(frozen=True)
class ProbeParams:
    """Knobs of the dichotomous search (defaults fit the simulator; a live run wants longer phases)."""

    warmup_s: float = 60.0
    cooldown_s: float = 30.0
    inject_s: float = 60.0
    observe_s: float = 60.0
    tolerance: float = 0.01
    precision: float = 0.01
    max_steps: int = 20
    backlog_tolerance: float | None = None  # None: tolerance / 10
    # calibrate: measure a censored or unconverged search once more (docs/calibration.md, step 7)
    measure_again: bool = True

    @property
    def growth_tolerance(self) -> float:
        """Allowed backlog growth over the observation phase, as a fraction of what was injected."""
        return self.tolerance / 10 if self.backlog_tolerance is None else self.backlog_tolerance


@dataclass(frozen=True)
class Window:
    """Per-second processed records and the backlog at the end of each second, for one injection window;
    `injected`, when the target knows it, the records that actually arrived each second."""

    processed: Sequence[float]
    backlog: Sequence[float]
    injected: Sequence[float] = ()


class ProbeTarget(Protocol):
    """What the probe drives: place replicas, inject at a rate for a while, report what was processed."""

    def configure(self, nodes: tuple[str, ...]) -> None:
        """Run the operator on exactly these nodes (empty backlog afterwards)."""

    def inject(self, rate: float, seconds: float) -> Window:
        """Inject `rate` records/s for `seconds` and report each second."""

    def upper_bound(self, nodes: tuple[str, ...]) -> float:
        """A rate surely above the MST of these nodes (the search's starting hi)."""


@dataclass
class ProbeResult:
    """One configuration's measured MST with its confidence and the search trace."""

    nodes: tuple[str, ...]
    n: int
    nd_max_ms: float
    mst: float
    spread: float
    steps: list[dict[str, float]] = field(default_factory=list)
    upper_bound: float = math.nan  # where the search started (the target's upper bound)
    bounded: bool = True  # False when no tried rate failed: the MST is at least `mst`, how much more is unknown
    remeasured_from: float | None = None  # the first search never failed and found at least this: measured again
    bracket_top: float = math.nan  # the top of the search's last bracket: the MST lies in [mst, bracket_top]

    @property
    def machine_limited(self) -> bool:
        """True when the injector fell short of a tried rate: the machine running the test, not the operator's
        nodes, was then the bottleneck (a small machine hosting the broker, the driver and every node), so this
        MST may be the machine's ceiling rather than the configuration's."""
        return any(injector_fell_short(s["rate"], s["injected"]) for s in self.steps if "injected" in s)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = asdict(self)
        d["nodes"] = list(self.nodes)
        d["machine_limited"] = self.machine_limited
        return d


CENSORED_TOP_SCALE = 2.0  # a censored search is measured again with its top this many times higher
INJECTOR_REACH = 0.97  # an injector delivering less than this share of the set rate was starved of CPU


def injector_fell_short(rate: float, injected: float) -> bool:
    """True when the records that arrived per second were clearly fewer than the rate set."""
    return injected < INJECTOR_REACH * rate


def backlog_growth(backlog: Sequence[float]) -> float:
    """How much the backlog grew over a window: the least-squares slope per sample times the window's length.

    A trend rather than last minus first, so that one sample caught at a bad moment does not decide.
    """
    b = np.asarray(backlog, dtype=float)
    if b.size < 2:
        return 0.0
    t = np.arange(b.size, dtype=float)
    slope = float(np.polyfit(t, b, 1)[0])
    return slope * (b.size - 1)


def _succeeds(rate: float, window: Window, params: ProbeParams) -> tuple[bool, float]:
    processed = float(np.mean(window.processed)) if len(window.processed) else 0.0
    growth = backlog_growth(window.backlog)
    injected = rate * len(window.processed)
    ok = processed >= rate * (1 - params.tolerance) and growth <= params.growth_tolerance * injected
    return ok, processed


def _measured_again(first: ProbeResult, again: ProbeResult) -> ProbeResult:
    """The second search's result, which remembers the first's MST and keeps both searches' steps in order (the
    trace of every rate tried); when nothing new held in it, the spread is the first's (measured at the rate
    that held there, which is still the MST)."""
    spread = first.spread if math.isnan(again.spread) else again.spread
    return replace(again, remeasured_from=first.mst, spread=spread, steps=[*first.steps, *again.steps])


def unconverged_top(result: ProbeResult, params: ProbeParams) -> float | None:
    """The top of a bounded search's last bracket when it stopped (out of steps) with [MST, top] still wider than
    `params.precision`; None when it converged (or never failed: see `bounded`)."""
    top = result.bracket_top
    if not result.bounded or not top > 0:
        return None
    return top if (top - result.mst) / top >= params.precision else None


def measure_mst(target: ProbeTarget, nodes: tuple[str, ...], nd_max_ms: float,
                params: ProbeParams = ProbeParams(),
                on_step: Callable[[dict[str, float]], None] | None = None,
                top_scale: float = 1.0, sustained: float = 0.0, top: float | None = None) -> ProbeResult:
    """Measure the MST of one configuration by the dichotomous search of the module docstring.

    `on_step` sees each tried rate's entry of the trace as soon as it is judged (progress output). A search
    measured again because it never failed (`calibrate`) passes `top_scale` (the top of the bracket is the
    target's upper bound times it) and `sustained`, the rate the first search showed sustained: the bracket
    starts there, so no step is spent below it. A search that ended with its bracket still wide passes the rate
    that failed as `top` (the target's upper bound then only warms it up, and its guess is not used).
    """
    target.configure(nodes)
    hi = upper_bound = float(target.upper_bound(nodes)) * top_scale
    if top is not None:
        hi = upper_bound = float(top)
    lo = min(max(0.0, sustained), hi)
    # A target that measured where the MST probably is (live: the saturated throughput) lets the search start
    # there: midpoints are taken in [floor, hi], the bracket symmetric around the guess. The floor is never a
    # result (only sustained rates are); once a rate at or below it fails, the search falls back to [0, hi].
    guess = getattr(target, "expected_mst", None)
    expected = guess(nodes) if callable(guess) else None
    floor = max(0.0, 2 * float(expected) - hi) if expected and top is None else 0.0
    target.inject(hi, params.warmup_s)
    target.inject(0.0, params.cooldown_s)
    best_window: Window | None = None
    steps: list[dict[str, float]] = []
    failed = False  # a rate above the result failed: the MST is bracketed, not only bounded below
    for _ in range(params.max_steps):
        if floor > lo and (hi - floor) / hi < params.precision:
            floor = lo  # nothing in the guessed bracket was sustained: the guess was wrong, search below it
        bottom = max(lo, floor)
        # Without a failure the top of the bracket is the target's bound, never observed: keep climbing.
        if hi <= 0 or ((hi - bottom) / hi < params.precision and failed):
            break
        rate = (bottom + hi) / 2
        target.inject(0.0, params.cooldown_s)
        target.inject(rate, params.inject_s)
        window = target.inject(rate, params.observe_s)
        ok, processed = _succeeds(rate, window, params)
        steps.append({"rate": rate, "processed": processed, "growth": backlog_growth(window.backlog),
                      "ok": float(ok)})
        if len(window.injected):
            steps[-1]["injected"] = float(np.mean(window.injected))
        if on_step:
            on_step(steps[-1])
        if ok:
            lo, best_window = rate, window
        else:
            hi, failed = rate, True
            if lo < processed < rate * (1 - params.tolerance):
                # The operator was saturated at `processed` (its MST, as Gesscale reads it under back pressure):
                # narrow the bracket around it, so the next rate is just below what it managed.
                hi = min(hi, processed * (1 + params.tolerance))
                floor = max(lo, processed * (1 - 3 * params.tolerance))
    spread = math.nan
    if best_window is not None and len(best_window.processed):
        p = np.asarray(best_window.processed, dtype=float)
        med = float(np.median(p))
        spread = float((np.percentile(p, 95) - np.percentile(p, 5)) / med) if med > 0 else math.nan
    return ProbeResult(nodes, len(nodes), nd_max_ms, lo, spread, steps, upper_bound, failed, bracket_top=hi)


def configurations(lmap: LatencyMap, replicas: Sequence[int], placements: Sequence[str]) -> list[tuple[str, ...]]:
    """Node sets to measure: for each n, the `near` set (min ND_max, as the controller places) and/or a `far`
    set (the near set of n-1 plus the node farthest from it), so that ND_max varies and gamma is identifiable.
    """
    graph = lmap.graph()
    out: list[tuple[str, ...]] = []
    for n in replicas:
        if n < 1 or n > len(lmap.names):
            raise UserError(f"cannot place {n} replicas on a map of {len(lmap.names)} nodes")
        near = tuple(placement.grow(graph, [], lmap.names, n))
        for kind in placements:
            if kind == "near":
                cfg = near
            elif kind == "far":
                if n == 1:
                    continue  # one replica has ND_max 0 wherever it is
                base = list(near[: n - 1])
                rest = [v for v in lmap.names if v not in base]
                far = max(rest, key=lambda v: (max(lmap.rtt(v, u) for u in base), v))
                cfg = tuple(base + [far])
            else:
                raise UserError(f"unknown placement {kind!r}; expected near or far")
            if cfg not in out:
                out.append(cfg)
    return out


@dataclass
class Calibration:
    """All measurements, the model fitted on all of them, and the held-out check."""

    results: list[ProbeResult]
    model: PerformanceModel
    holdout: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """The model file: `model` is what `PerformanceModel.from_dict` and the controller read."""
        return {
            "model": self.model.to_dict(),
            "measurements": [r.to_dict() for r in self.results],
            "holdout": self.holdout,
        }


def calibrate(target: ProbeTarget, lmap: LatencyMap, configs: Sequence[tuple[str, ...]],
              params: ProbeParams = ProbeParams(),
              progress: Callable[[ProbeResult], None] | None = None,
              on_step: Callable[[dict[str, float]], None] | None = None, form: str = "paper",
              latency: str = "nd_max", site: str | None = None) -> Calibration:
    """Measure every configuration, fit the model in `form` (`auto`: chosen by leave-one-out error, see
    `gesscale.model`), and check its prediction on a held-out configuration.

    A search in which every tried rate held (censored: `bounded` false) is measured once more with a higher
    top, and one that ran out of steps with its bracket still wider than `precision` is measured once more in
    that bracket (`params.measure_again`), so that the fit takes neither a lower bound nor a bracket's bottom for
    the MST.

    The held-out configuration is the one with the most replicas and, among those, the largest ND_max (the
    extrapolation users care about); the check needs at least four configurations so that three remain to fit
    alpha, beta and the latency term. The held-out fit uses the same `form` on the others.

    `latency` is what the measurements' latency is (`gesscale.model.MODEL_LATENCIES`): ND_max on `lmap`, or
    `site`, the farthest replica's RTT to `site` (`gesscale.site_view`); the model records it.
    """
    from gesscale.site_view import SiteView

    if latency == "site" and site is None:
        raise UserError("a calibration in latency site needs the site (the node of the broker and the driver)")
    seen: Any = SiteView(lmap, site) if latency == "site" else lmap
    results = []
    for cfg in configs:
        r = measure_mst(target, cfg, seen.nd_max(cfg), params, on_step)
        if not r.bounded and params.measure_again:
            # every rate tried held: the MST is only known to be at least r.mst. Measure it again with a top
            # CENSORED_TOP_SCALE times higher, starting from what held, so the model is fitted on a bracketed MST.
            again = measure_mst(target, cfg, seen.nd_max(cfg), params, on_step, top_scale=CENSORED_TOP_SCALE,
                                sustained=r.mst)
            r = _measured_again(r, again)
        elif params.measure_again and (failed := unconverged_top(r, params)) is not None:
            # the steps ran out with the bracket [MST, failed] still wider than `precision` (a rate failed and
            # the search fell back far below it): search that bracket again rather than keep its bottom
            again = measure_mst(target, cfg, seen.nd_max(cfg), params, on_step, sustained=r.mst, top=failed)
            r = _measured_again(r, again)
        results.append(r)
        if progress:
            progress(r)
    points = [Measurement(r.n, r.nd_max_ms, r.mst) for r in results if r.mst > 0]
    holdout = None
    configs_measured = {(p.n, round(p.nd_max_ms, 1)) for p in points}
    if len(configs_measured) >= 4:
        # the configuration held out, with all its repeats (a repeat left in would not make it held out)
        key = max(configs_measured, key=lambda c: (c[0], c[1]))
        held = [p for p in points if (p.n, round(p.nd_max_ms, 1)) == key]
        train = [p for p in points if (p.n, round(p.nd_max_ms, 1)) != key]
        m = PerformanceModel(form=form, latency=latency).fit(train)
        measured = sum(p.mst for p in held) / len(held)
        predicted = m.predict(held[0].n, held[0].nd_max_ms)
        holdout = {
            "form": m.form_,
            "n": held[0].n,
            "nd_max_ms": held[0].nd_max_ms,
            "measured": measured,
            "predicted": predicted,
            "error": (predicted - measured) / measured,
        }
    return Calibration(results, PerformanceModel(form=form, latency=latency).fit(points), holdout)


class SimProbeTarget:
    """The probe target of the simulator: the scenario's ground truth with per-second capacity noise."""

    def __init__(self, truth: GroundTruth, lmap: LatencyMap, seed: int = 1, site: str | None = None) -> None:
        from gesscale.site_view import SiteView

        self.truth = truth
        self.lmap = lmap
        # the truth's latency: ND_max, or the farthest replica's RTT to the site (`operator.latency: site`)
        self.seen: Any = SiteView(lmap, site) if truth.latency == "site" and site is not None else lmap
        self.rng = np.random.default_rng([seed, 11])
        self.mst = 0.0
        self.backlog = 0.0

    def configure(self, nodes: tuple[str, ...]) -> None:
        """Place replicas on `nodes` (the simulator starts them instantly, with an empty backlog)."""
        self.mst = self.truth.mst(len(nodes), self.seen.nd_max(nodes))
        self.backlog = 0.0

    def upper_bound(self, nodes: tuple[str, ...]) -> float:
        """Twice what the nodes could do if latency did not matter."""
        return 2.0 * self.truth.alpha * max(1, len(nodes)) ** max(1.0, self.truth.beta)

    def inject(self, rate: float, seconds: float) -> Window:
        """Fluid model: each second, process up to the noisy capacity; the rest waits."""
        n = int(round(seconds))
        caps = self.mst * np.maximum(0.0, 1.0 + self.rng.normal(0.0, self.truth.noise, n))
        processed, backlog = np.empty(n), np.empty(n)
        b = self.backlog
        for i in range(n):
            avail = b + rate
            done = min(avail, caps[i])
            b = avail - done
            processed[i], backlog[i] = done, b
        self.backlog = b
        return Window(processed.tolist(), backlog.tolist())
