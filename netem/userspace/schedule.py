"""The daemon's held packets, ordered by release time (pure).

A heap of (release time, arrival number, packet id): the earliest release first, and packets due at the same time
in the order they arrived, so a flow whose release times were made equal to keep its order (netem.userspace.model)
leaves in order.
"""

from __future__ import annotations

import heapq


class ReleaseQueue:
    """Packet ids waiting for their release time (monotonic seconds)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int]] = []
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, at: float, packet_id: int) -> None:
        """Hold `packet_id` until `at`."""
        self._arrivals += 1
        heapq.heappush(self._heap, (at, self._arrivals, packet_id))

    def next_due(self) -> float | None:
        """The earliest release time held, or None when nothing is held."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[int]:
        """The ids whose release time is `now` or earlier, in release order; they are no longer held."""
        heap, due = self._heap, []
        pop = heapq.heappop
        while heap and heap[0][0] <= now:
            due.append(pop(heap)[2])
        return due

    def drain(self) -> list[int]:
        """Every id held, in release order (at shutdown: release them all now)."""
        due = [entry[2] for entry in sorted(self._heap)]
        self._heap.clear()
        return due
