"""The cheapest replica schedule that pays every reconfiguration pause: an exact dynamic programme (pure, no I/O).

The problem is the simulator's own (`gesscale/sim_backend.py`), known in advance: records arriving in each
second `input[i]`, records that n replicas can process in second i `capacity[n, i]` (noise included), a pause of
`pause_s` seconds without processing after every change, and one decision per control period of `period_s`
seconds (period 0 runs on `n_start`). Per second the backlog follows the Lindley recursion
x_i = max(0, x_{i-1} + input_i − capacity_i) (capacity 0 while paused), so one period with a fixed count and a
fixed pause maps a starting backlog b to max(A, b + S) for two numbers A ≥ 0 and S (closed form from a cumulative
sum), and every constraint on the period becomes an upper bound on b.

Minimised: cost = replica-seconds until completion (the metrics' definition: completion is the last second with
a backlog of at least one record, plus one, and never before the input ends), in replica-minutes.
Subject to:
- excess time ≤ `max_excess`: the backlog is below one record at second ⌊T (1 + max_excess)⌋;
- every record is processed within `max_delay_s` seconds of its arrival (FIFO, to one record): the backlog after
  second i never exceeds the input of the last `max_delay_s` seconds plus one. Without this bound the cheapest
  schedule would hoard hours of backlog and drain it just before the input ends.

Discretisation: the backlog lives on a uniform grid of `bins` points over [0, largest allowed backlog]. The
programme is solved twice: with the next backlog rounded up (every plan it finds is truly feasible, and its value
is an upper bound on that plan's true cost) and rounded down (a relaxation: its value is a lower bound on the
true optimum). The true optimum lies in [cost_lower, cost_upper]; the gap is the discretisation error, reported
with every solution. Time is exact (one-second steps); only the backlog is discretised.

State per period: previous count n, pause seconds still to run q (0 unless the pause is longer than a period),
backlog index; decisions: any count in [n_min, n_max]. Work: periods × counts² × pause states × bins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INFEASIBLE = math.inf


@dataclass(frozen=True)
class OfflineProblem:
    """Everything the optimum depends on, for one run (arrays are per second from the run's start)."""

    input: np.ndarray  # records arriving in second i, i < T (T = len(input))
    capacity: np.ndarray  # shape (n_max + 1, H), H ≥ the seconds the programme covers; row n: n replicas
    period_s: int
    pause_s: int
    n_min: int
    n_max: int
    n_start: int
    max_delay_s: int
    max_excess: float = 0.0
    bins: int = 4000
    n_floor: int = 0  # fewest replicas a decision may choose when n_start lies below the bound (0: n_min)

    @property
    def duration_s(self) -> int:
        """T: seconds of input."""
        return len(self.input)

    @property
    def deadline_s(self) -> int:
        """The second at whose end the backlog must be below one record (the excess and delay bounds)."""
        T = self.duration_s
        return min(int(math.floor(T * (1.0 + self.max_excess) + 1e-9)), T + self.max_delay_s)

    @property
    def periods(self) -> int:
        """Periods the programme decides: up to and including the one holding the deadline second."""
        return self.deadline_s // self.period_s + 1


@dataclass(frozen=True)
class OfflinePlan:
    """The schedule (replicas in each period; period 0 is the start) and the bracket on the optimum."""

    targets: tuple[int, ...]
    feasible: bool
    cost_upper: float  # replica-minutes: this plan's cost as the rounded-up programme tracks it (≥ its true cost)
    cost_lower: float  # replica-minutes: no schedule meeting the bounds costs less
    cost_plan: float  # replica-minutes: this plan's cost replayed exactly (no grid)
    backlog_step: float  # records between grid points

    @property
    def gap(self) -> float:
        """Relative discretisation error bound: (upper − lower) / lower."""
        return (self.cost_upper - self.cost_lower) / self.cost_lower if self.cost_lower > 0 else 0.0


@dataclass(frozen=True)
class _PeriodMaps:
    """Per period k, count m and pause option p: the end map max(A, b + S) and the bounds on the start backlog."""

    A: np.ndarray  # (K, M, P) backlog at the period's end from b = 0
    S: np.ndarray  # (K, M, P) net change when the backlog never empties
    upper: np.ndarray  # (K, M, P) largest start backlog meeting every constraint of the period (−inf: none)
    before: np.ndarray  # (K,) seconds of the period before the input ends (always counted)
    after: dict[int, np.ndarray]  # period → (M, P, B) seconds from T on still counted (backlog ≥ 1), per grid point
    carry: np.ndarray  # (P,) pause seconds left for the next period


def _pause_options(pause_s: int, period_s: int) -> list[int]:
    """Pause seconds at a period's start: 0, a fresh pause, and what a long pause carries into later periods."""
    opts = [0, pause_s]
    left = pause_s - period_s
    while left > 0:
        opts.append(left)
        left -= period_s
    return sorted(set(opts))


def _window_input(inp: np.ndarray, length: int, window: int) -> np.ndarray:
    """Input of the last `window` seconds at each second 0..length−1 (input is 0 after it ends)."""
    full = np.zeros(length)
    full[: min(length, len(inp))] = inp[:length]
    csum = np.concatenate([[0.0], np.cumsum(full)])
    idx = np.arange(length)
    return csum[idx + 1] - csum[np.maximum(0, idx + 1 - window)]


def _period_maps(pr: OfflineProblem, grid: np.ndarray, opts: list[int]) -> _PeriodMaps:
    K, L, T = pr.periods, pr.period_s, pr.duration_s
    H = K * L
    if pr.capacity.shape[1] < H:
        raise ValueError(f"capacity covers {pr.capacity.shape[1]} s, the programme needs {H}")
    inp = np.zeros(H)
    inp[: min(H, T)] = pr.input[:H]
    window = _window_input(pr.input, H, pr.max_delay_s).reshape(K, L)
    inp = inp.reshape(K, L)
    counts = np.arange(pr.n_min, pr.n_max + 1)
    cap = pr.capacity[counts, :H].reshape(len(counts), K, L).transpose(1, 0, 2)  # (K, M, L)
    offset = np.arange(L)
    running = offset[None, :] >= np.asarray(opts)[:, None]  # (P, L): seconds not paused
    d = inp[:, None, None, :] - cap[:, :, None, :] * running[None, None, :, :]  # (K, M, P, L)
    S = np.cumsum(d, axis=3)
    A = S - np.minimum(0.0, np.minimum.accumulate(S, axis=3))  # backlog at each second from b = 0
    # FIFO delay bound: max(A_j, b + S_j) ≤ W_j + 1 at every second j.
    slack = window[:, None, None, :] + 1.0
    upper = np.min(slack - S, axis=3)
    upper = np.where(np.all(slack >= A, axis=3), upper, -np.inf)
    # Deadline: below one record at the end of the deadline second.
    kd, jd = divmod(pr.deadline_s, L)
    below = 1.0 - 1e-6  # strictly below one record, clear of the 1e-9 grid tolerance
    dl_upper = np.where(A[kd, :, :, jd] <= below, below - S[kd, :, :, jd], -np.inf)
    upper[kd] = np.minimum(upper[kd], dl_upper)
    # Seconds counted towards the cost: all before T; from T on (input over, backlog non-increasing), those
    # whose backlog is still at least one record.
    absolute = (np.arange(K)[:, None] * L + offset[None, :])  # (K, L)
    before = (absolute < T).sum(axis=1).astype(float)
    after: dict[int, np.ndarray] = {}
    for k in np.nonzero((absolute >= T).any(axis=1))[0]:
        js = np.nonzero(absolute[k] >= T)[0]
        x = np.maximum(grid[None, None, :, None] + S[k][:, :, None, js], A[k][:, :, None, js])  # (M, P, B, J)
        after[int(k)] = (x >= 1.0).sum(axis=3).astype(float)
    carry = np.maximum(0, np.asarray(opts) - L)
    return _PeriodMaps(A[..., -1], S[..., -1], upper, before, after, carry)


def _solve_grid(pr: OfflineProblem, maps: _PeriodMaps, grid: np.ndarray, opts: list[int], *, round_up: bool,
                keep_choices: bool) -> tuple[np.ndarray, list[np.ndarray]]:
    """Backward induction; returns V_1 (value before the decision of period 1) and the choices per period."""
    K = pr.periods
    M, P, B = len(range(pr.n_min, pr.n_max + 1)), len(opts), len(grid)
    step = grid[1] - grid[0] if B > 1 else 1.0
    counts = np.arange(pr.n_min, pr.n_max + 1)
    carry_idx = np.array([opts.index(int(c)) if int(c) in opts else 0 for c in maps.carry])  # (P,)
    fresh = opts.index(pr.pause_s)
    V = np.zeros((M, P, B))  # value after the last period: nothing more is counted
    choices: list[np.ndarray] = []
    for k in range(K - 1, 0, -1):
        nxt = np.maximum(maps.A[k][:, :, None], grid[None, None, :] + maps.S[k][:, :, None])  # (M, P, B)
        pos = nxt / step
        idx = np.ceil(pos - 1e-9) if round_up else np.floor(pos + 1e-9)
        over = idx > B - 1
        idx = np.clip(idx, 0, B - 1).astype(np.intp)
        future = V[np.arange(M)[:, None, None], carry_idx[None, :, None], idx]  # (M, P, B)
        seconds = maps.before[k] + maps.after[k] if k in maps.after else maps.before[k]
        cand = counts[:, None, None] * seconds + future
        bad = over | (grid[None, None, :] > maps.upper[k][:, :, None] + 1e-9)
        bad = bad | (counts < pr.n_floor)[:, None, None]
        cand = np.where(bad, INFEASIBLE, cand)  # (m, p, b): run m for the period with p pause seconds first
        change = cand[:, fresh, :]  # (M, B): a change to m starts a fresh pause
        best_change = np.full((M, B), INFEASIBLE)
        arg_change = np.zeros((M, B), dtype=np.intp)
        if M > 1:
            order = np.argsort(change, axis=0)  # the best and second-best m exclude the previous count
            first, second = order[0], order[1]
            take_first = first[None, :] != np.arange(M)[:, None]
            arg_change = np.where(take_first, first[None, :], second[None, :])
            best_change = np.take_along_axis(change, arg_change, axis=0)
        stay = cand[np.arange(M), :, :]  # (n, q, b): keep n, the carried pause q runs on
        newV = np.minimum(stay, best_change[:, None, :])
        if keep_choices:
            choice = np.where(stay <= best_change[:, None, :], np.arange(M)[:, None, None], arg_change[:, None, :])
            choices.append(choice.astype(np.int8))
        V = newV
    choices.reverse()  # choices[k − 1] decides period k
    return V, choices


def _replay(pr: OfflineProblem, targets: list[int]) -> tuple[float, bool]:
    """Exact per-second replay of a schedule: (cost in replica-minutes, whether it meets every bound)."""
    T, L = pr.duration_s, pr.period_s
    horizon = pr.periods * L
    window = _window_input(pr.input, horizon, pr.max_delay_s)
    x, pause, prev, seconds, ok, last_busy = 0.0, 0, targets[0], np.zeros(horizon), True, -1
    for k, n in enumerate(targets):
        if n != prev:
            pause = pr.pause_s
        prev = n
        for i in range(k * L, (k + 1) * L):
            inp = pr.input[i] if i < T else 0.0
            if pause > 0:
                pause -= 1
                x += inp
            else:
                x = max(0.0, x + inp - pr.capacity[n, i])
            seconds[i] = n
            ok = ok and x <= window[i] + 1.0
            if x >= 1.0:
                last_busy = i
    completion = max(T, last_busy + 1)
    ok = ok and completion <= pr.deadline_s
    return float(seconds[:completion].sum() / 60.0), ok


def solve(pr: OfflineProblem) -> OfflinePlan:
    """The cheapest schedule meeting the bounds, with the discretisation bracket (see the module docstring)."""
    if not pr.n_min <= pr.n_start <= pr.n_max:
        raise ValueError("n_start outside [n_min, n_max]")
    opts = _pause_options(pr.pause_s, pr.period_s)
    largest = float(_window_input(pr.input, pr.periods * pr.period_s, pr.max_delay_s).max()) + 1.0
    grid = np.linspace(0.0, largest, max(2, pr.bins))
    maps = _period_maps(pr, grid, opts)
    s0 = pr.n_start - pr.n_min
    # Period 0 runs on n_start with no pause from b = 0; then the programme decides.
    first_ok = maps.upper[0, s0, 0] >= 0.0
    cost0 = pr.n_start * (maps.before[0] + (maps.after[0][s0, 0, 0] if 0 in maps.after else 0.0))
    b1 = float(max(maps.A[0, s0, 0], maps.S[0, s0, 0]))
    results = {}
    for up in (True, False):
        V, choices = _solve_grid(pr, maps, grid, opts, round_up=up, keep_choices=up)
        pos = b1 / (grid[1] - grid[0])
        i1 = int(np.ceil(pos - 1e-9)) if up else int(np.floor(pos + 1e-9))
        value = INFEASIBLE if (not first_ok or i1 > len(grid) - 1) else cost0 + V[s0, 0, i1]
        results[up] = (value, choices, i1)
    upper, choices, idx = results[True]
    lower = results[False][0]
    step = float(grid[1] - grid[0])
    if not math.isfinite(upper):
        return OfflinePlan((pr.n_start,) * pr.periods, False, INFEASIBLE, lower, INFEASIBLE, step)
    # Forward: follow the rounded-up programme's choices.
    targets, n, q, b = [pr.n_start], s0, 0, idx
    carry = [opts.index(int(c)) if int(c) in opts else 0 for c in maps.carry]
    fresh = opts.index(pr.pause_s)
    for k in range(1, pr.periods):
        m = int(choices[k - 1][n, q, b])
        p = q if m == n else fresh
        nxt = max(maps.A[k, m, p], grid[b] + maps.S[k, m, p])
        b = min(len(grid) - 1, int(np.ceil(nxt / step - 1e-9)))
        n, q = m, carry[p]
        targets.append(m + pr.n_min)
    cost_plan, ok = _replay(pr, targets)
    return OfflinePlan(tuple(targets), ok, upper / 60.0, lower / 60.0, cost_plan, step)
