"""One control period of a live job, from its micro-batches: the pure summary both live backends share.

A live backend (`gesscale/testbed/backend.py`, `gesscale/k8s/backend.py`) only gathers inputs (the job's
`BatchRecord`s of the period, the input topic's offsets when it can read the broker, the placement, the CPU)
and calls `observation_from_batches`, which does the arithmetic (docs/metrics.md, docs/controller.md):

- processed rows: with the complete log of the period's batches (`sampled=False`), the sum of their rows; with
  samples of the job's latest batch (`sampled=True`, all a backend polling `GET /observation` sees), the mean
  rows of the sampled batches times the number of batches completed (batch ids from the one before the period
  to the newest), exact when every batch was sampled;
- throughput CT = processed / period;
- with the broker's input offsets (`InputOffsets`): input rate IR = growth of Σ end offsets / the time it grew
  over; backlog = Σ end offsets − rows processed so far; its growth = backlog − the backlog at the start of the
  period (what was there, plus what arrived, minus what the period processed);
- without them: the backlog is the one the job recorded with its newest batch, the growth is taken from the
  batch before the period, and IR = max(0, (processed + growth) / period);
- BP_{i-1} = share of the period's batches held back by admission control; with no batch in the period the
  job's own windowed figure of the batch before it (0 without one): a pause is not a measurement of MST;
- BP_i = the newest batch's `bp_operator` (0 for the Kafka sink);
- busy = Σ batch durations / period (at most 1), only from the complete log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gesscale.batch_record import BatchRecord
from gesscale.observation import Observation


@dataclass(frozen=True)
class InputOffsets:
    """The input topic as the broker reports it, for a backend that reads the broker itself."""

    end: int  # Σ end offsets of the input topic now
    arrived: int  # growth of `end` since the previous observation
    elapsed_s: float  # wall time over which `arrived` arrived (> 0)
    processed: int  # rows of the distinct batches the job processed since it started


def observation_from_batches(
    batches: Sequence[BatchRecord],
    *,
    time_s: float,
    period_s: float,
    replicas: tuple[str, ...],
    nd_max_ms: float,
    offsets: InputOffsets | None = None,
    before: BatchRecord | None = None,
    sampled: bool = False,
    cpu: float | None = None,
    extra: dict[str, Any] | None = None,
) -> Observation:
    """Summarise one period (module docstring). `batches` completed in the period (`period_s` > 0); `before` is
    the job's newest batch before it, when known; `extra` is added to the observation's after `batches`."""
    newest = max(batches, key=lambda b: b.batch_id) if sampled and batches else (batches[-1] if batches else None)
    last = newest or before
    if sampled:
        processed = 0.0
        if batches:
            base = before.batch_id if before else min(b.batch_id for b in batches) - 1
            span = max(b.batch_id for b in batches) - base
            processed = sum(float(b.num_input_rows) for b in batches) / len(batches) * span
    else:
        processed = sum(b.num_input_rows for b in batches)
    if offsets is not None:
        backlog = max(0, offsets.end - offsets.processed)
        previous = max(0, offsets.end - offsets.arrived - (offsets.processed - processed))
        growth = float(backlog - previous)
        input_rate = offsets.arrived / offsets.elapsed_s
    else:
        backlog = float(last.backlog) if last else 0.0
        growth = backlog - (float(before.backlog) if before else 0.0)
        input_rate = max(0.0, (processed + growth) / period_s)
    if batches:
        bp_upstream = sum(1 for b in batches if b.held_back) / len(batches)
    else:
        bp_upstream = before.bp_upstream if before else 0.0
    busy = None if sampled else min(1.0, sum(b.batch_duration_ms for b in batches) / 1000.0 / period_s)
    return Observation(
        time_s=time_s,
        period_s=period_s,
        input_rate=input_rate,
        throughput=processed / period_s,
        backlog=float(backlog),
        backlog_growth=growth,
        bp_upstream=bp_upstream,
        bp_operator=last.bp_operator if last else 0.0,
        replicas=replicas,
        nd_max_ms=nd_max_ms,
        cpu=cpu,
        busy=busy,
        extra={"batches": len(batches), **(extra or {})},
    )
