"""The end of a run that replays a finite input (gesscale/run_end.py): the demo's rule, which the twin plays too."""

from __future__ import annotations

from gesscale.mape import StepRecord
from gesscale.observation import Decision, Observation, Reconfiguration
from gesscale.run_end import AfterDrain, DrainedEnd


def _record(n: int, backlog: float = 0.0, input_rate: float = 0.0, to: int | None = None,
            t: float = 100.0) -> StepRecord:
    nodes = tuple(f"fog{i}" for i in range(1, n + 1))
    obs = Observation(time_s=t, period_s=10.0, input_rate=input_rate, throughput=0.0, backlog=backlog,
                      backlog_growth=0.0, bp_upstream=0.0, bp_operator=0.0, replicas=nodes, nd_max_ms=0.0)
    change = None
    if to is not None:
        change = Reconfiguration(time_s=t, kind="down", added=(), removed=nodes[to:], nodes=nodes[:to], nd_max_ms=0.0,
                                 pause_s=0.0)
    return StepRecord(obs, Decision(to if to is not None else n, ""), change, change is not None)


def _never(_t: float) -> bool:
    return False


def test_a_period_with_input_or_backlog_or_before_the_input_ended_is_not_drained() -> None:
    end = DrainedEnd()
    assert not end.over(None, True, _never)
    assert not end.over(_record(3, backlog=5.0), True, _never)
    assert not end.over(_record(3, input_rate=2.0), True, _never)
    assert not end.over(_record(3), False, _never)
    assert end.drained == 0


def test_the_drained_periods_let_the_replicas_scale_in_one_by_one() -> None:
    # a threshold policy scales 4 -> 3 -> 2 -> 1, one replica per drained period: three more periods, not none
    end = DrainedEnd()
    assert [end.over(_record(n, to=n - 1), True, _never) for n in (4, 3, 2)] == [False, False, True]


def test_after_the_periods_outside_the_warm_up_or_the_most_periods_it_ends() -> None:
    end = DrainedEnd(AfterDrain(periods=3, max_periods=8))
    assert [end.over(_record(3), True, _never) for _ in range(4)] == [False, False, False, True]
    warm = DrainedEnd(AfterDrain(periods=3, max_periods=8))
    assert [warm.over(_record(3), True, lambda _t: True) for _ in range(9)] == [False] * 8 + [True]
