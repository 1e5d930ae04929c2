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
from dataclasses import dataclass, replace

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
        if not (math.isfinite(self.cost_upper) and math.isfinite(self.cost_lower)):
            return INFEASIBLE  # no feasible plan: no bracket
        return (self.cost_upper - self.cost_lower) / self.cost_lower if self.cost_lower > 0 else 0.0


@dataclass(frozen=True)
class _PeriodMaps:
    """Per period k, count m and pause option p: the end map max(A, b + S) and the bounds on the start backlog."""

    A: np.ndarray  # (K, M, P) backlog at the period's end from b = 0
    S: np.ndarray  # (K, M, P) net change when the backlog never empties
    upper: np.ndarray  # (K, M, P) largest start backlog meeting every constraint of the period (−inf: none)
    before: np.ndarray  # (K,) seconds of the period before the input ends (always counted)
    tail: dict[int, tuple[np.ndarray, np.ndarray]]  # period → (S, A) over its seconds from T on, each (M, P, J)
    carry: np.ndarray  # (P,) pause seconds left for the next period

    def after(self, k: int, grid: np.ndarray) -> np.ndarray | None:
        """(M, P, B) seconds from T on in period k still counted (backlog ≥ 1) per grid point; None before T."""
        if k not in self.tail:
            return None
        S, A = self.tail[k]
        return _seconds_busy(grid, S, A)


# The programme keeps one choice (a byte) per period, count, pause option and grid point for the forward pass: its
# largest array. A problem whose choices would take more is solved on a coarser decision grid (`coarsened`).
CHOICES_BUDGET_BYTES = 320 * 2**20


def choices_bytes(pr: OfflineProblem) -> int:
    """Bytes of the programme's choices (periods × counts × pause options × grid points)."""
    counts = pr.n_max - pr.n_min + 1
    return pr.periods * counts * len(_pause_options(pr.pause_s, pr.period_s)) * max(2, pr.bins)


def coarsened(pr: OfflineProblem, budget: int | None = None) -> OfflineProblem:
    """The problem decided every c control periods, c the fewest whose choices fit in `budget` (1: unchanged).

    Work and memory grow as periods × pause options × counts × bins: a one-second period with a 120 s pause on a
    day has 86,400 periods and 121 pause options (hundreds of GB of choices). Deciding every c periods instead
    gives a schedule the policy can follow exactly (it holds its count between decisions), so the plan stays
    feasible; its cost is then the optimum over schedules that change at most every c periods."""
    budget = CHOICES_BUDGET_BYTES if budget is None else budget
    stride, base = 1, pr.period_s
    while choices_bytes(pr) > budget and pr.period_s <= pr.deadline_s:
        stride += 1
        pr = replace(pr, period_s=base * stride)
    return pr


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


# Elements of the (periods, counts, pauses, seconds) arrays built at once: periods are taken in chunks of this
# size, so that a long period (a day) or a fine one (a second, with a long pause) never needs all of them together.
_CHUNK_ELEMENTS = 2_000_000


def _period_maps(pr: OfflineProblem, opts: list[int]) -> _PeriodMaps:
    K, L, T = pr.periods, pr.period_s, pr.duration_s
    H = K * L
    if pr.capacity.shape[1] < H:
        raise ValueError(f"capacity covers {pr.capacity.shape[1]} s, the programme needs {H}")
    inp_all = np.zeros(H)
    inp_all[: min(H, T)] = pr.input[:H]
    window_all = _window_input(pr.input, H, pr.max_delay_s).reshape(K, L)
    inp_all = inp_all.reshape(K, L)
    counts = np.arange(pr.n_min, pr.n_max + 1)
    M, P = len(counts), len(opts)
    offset = np.arange(L)
    running = offset[None, :] >= np.asarray(opts)[:, None]  # (P, L): seconds not paused
    kd, jd = divmod(pr.deadline_s, L)
    below = 1.0 - 1e-6  # strictly below one record, clear of the 1e-9 grid tolerance
    A_end, S_end, upper = (np.empty((K, M, P)) for _ in range(3))
    tail: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    step = max(1, _CHUNK_ELEMENTS // max(1, M * P * L))
    for k0 in range(0, K, step):
        k1 = min(K, k0 + step)
        inp, window = inp_all[k0:k1], window_all[k0:k1]
        cap = pr.capacity[counts, k0 * L:k1 * L].reshape(M, k1 - k0, L).transpose(1, 0, 2)  # (k, M, L)
        d = inp[:, None, None, :] - cap[:, :, None, :] * running[None, None, :, :]  # (k, M, P, L)
        S = np.cumsum(d, axis=3)
        del d
        A = S - np.minimum(0.0, np.minimum.accumulate(S, axis=3))  # backlog at each second from b = 0
        # FIFO delay bound: max(A_j, b + S_j) ≤ W_j + 1 at every second j.
        slack = window[:, None, None, :] + 1.0
        up = np.min(slack - S, axis=3)
        upper[k0:k1] = np.where(np.all(slack >= A, axis=3), up, -np.inf)
        if k0 <= kd < k1:  # deadline: below one record at the end of the deadline second
            A_d, S_d = A[kd - k0, :, :, jd], S[kd - k0, :, :, jd]
            upper[kd] = np.minimum(upper[kd], np.where(A_d <= below, below - S_d, -np.inf))
        # Seconds counted towards the cost: all before T; from T on (input over, backlog non-increasing), those
        # whose backlog is still at least one record: kept per period, counted per grid point when needed.
        for k in range(k0, k1):
            first = T - k * L
            if first < L:
                js = slice(max(0, first), L)
                tail[k] = (S[k - k0][:, :, js].copy(), A[k - k0][:, :, js].copy())
        A_end[k0:k1], S_end[k0:k1] = A[..., -1], S[..., -1]
    absolute = (np.arange(K)[:, None] * L + offset[None, :])  # (K, L)
    before = (absolute < T).sum(axis=1).astype(float)
    carry = np.maximum(0, np.asarray(opts) - L)
    return _PeriodMaps(A_end, S_end, upper, before, tail, carry)


def _seconds_busy(grid: np.ndarray, S: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(M, P, B): how many seconds of S and A (M, P, J), all after the input's end, keep at least one record
    waiting, from each start backlog b of the grid: the count of j with max(A_j, b + S_j) >= 1.

    With no input left, S and A do not increase over those seconds, so both "A_j >= 1" and "b + S_j >= 1" hold
    on a prefix of them and the count is the longer prefix: found by a binary search per (count, pause) rather
    than by comparing every (second, grid point) pair, whose (M, P, B, J) array took 27 GiB for a 60000 s
    period."""
    M, P = S.shape[0], S.shape[1]
    S_after, A_after = S, A
    from_zero = (A_after >= 1.0).sum(axis=2)  # (M, P)
    out = np.empty((M, P, len(grid)))
    for m in range(M):
        for p in range(P):
            # b + S_j >= 1 <=> -S_j <= b - 1; -S is non-decreasing.
            with_b = np.searchsorted(-S_after[m, p], grid - 1.0, side="right")
            out[m, p] = np.maximum(with_b, from_zero[m, p])
    return out


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
        after = maps.after(k, grid)
        seconds = maps.before[k] if after is None else maps.before[k] + after
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
    maps = _period_maps(pr, opts)
    s0 = pr.n_start - pr.n_min
    # Period 0 runs on n_start with no pause from b = 0; then the programme decides.
    first_ok = maps.upper[0, s0, 0] >= 0.0
    after0 = maps.after(0, grid)
    cost0 = pr.n_start * (maps.before[0] + (after0[s0, 0, 0] if after0 is not None else 0.0))
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
