"""What every fault test shares: a seeded, printed random moment, the test's own count of keys, and one result
line per fault (appended to `$GESSCALE_FAULT_LOG` when set, which `benchmarks/bench_faults.py` reads).

`GESSCALE_FAULT_SEED=N` replays a run: each fault draws from `random.Random(f"{N}:{fault}")`.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gesscale.brokers import KafkaBroker
from gesscale.brokers.topics import read_values

SEED_ENV = "GESSCALE_FAULT_SEED"
LOG_ENV = "GESSCALE_FAULT_LOG"


@dataclass
class Fault:
    """One fault injection: its name, seed and random source, and what it measured."""

    name: str
    seed: int
    rnd: random.Random = field(repr=False)

    def moment(self, low_s: float, high_s: float) -> float:
        """A random moment in [low_s, high_s] seconds, printed so that a failure can be replayed."""
        t = self.rnd.uniform(low_s, high_s)
        print(f"\n[{self.name}] seed {self.seed} ({SEED_ENV}={self.seed} replays it): kill -9 at {t:.2f} s", flush=True)
        return t

    def record(self, sent: int, lost: int, duplicated: int, reported: str = "") -> None:
        """Print the outcome and append it to `$GESSCALE_FAULT_LOG` (one JSON line)."""
        row = {"fault": self.name, "seed": self.seed, "sent": sent, "lost": lost, "duplicated": duplicated,
               "reported": reported}
        print(f"[{self.name}] sent {sent}, lost {lost}, duplicated {duplicated}"
              + (f"; reported: {reported}" if reported else ""), flush=True)
        path = os.environ.get(LOG_ENV)
        if path:
            with Path(path).open("a") as fh:
                fh.write(json.dumps(row) + "\n")


def fault(name: str) -> Fault:
    """A `Fault` seeded from `$GESSCALE_FAULT_SEED`, else from the clock."""
    seed = int(os.environ.get(SEED_ENV) or time.time_ns() % 1_000_000)
    return Fault(name, seed, random.Random(f"{seed}:{name}"))


def tally(counts: Counter[str], expected: Iterable[str]) -> tuple[int, int]:
    """(lost, duplicated) of a sink's key counts against the keys that should be there once each; a key the
    sink holds that was never expected counts as duplicated (something wrote what nobody sent)."""
    want = set(expected)
    lost = len(want - set(counts))
    duplicated = sum(counts.values()) - len(set(counts) & want)
    return lost, duplicated


def key_counts(bootstrap: str, topic: str) -> Counter[str]:
    """Occurrences of each record key (the JSON `key` field) in the topic: the test's own count."""
    return Counter(json.loads(value)["key"] for _, _, value in read_values(bootstrap, topic))


def crash(broker: KafkaBroker, down_s: float = 0.3) -> None:
    """kill -9, then the same broker on the same data directory `down_s` later."""
    broker.kill()
    time.sleep(down_s)
    broker.restart()


def synthetic_keys(rides: int, duplication: int) -> set[str]:
    """The keys of the synthetic trace: rides s1..sN, each `duplication` copies."""
    return {f"s{ride}-{dup}" for ride in range(1, rides + 1) for dup in range(duplication)}
