"""When the delay daemon releases each packet: delay, jitter, loss and per-flow order (pure, seeded).

Jitter and order. netem draws each packet's delay independently, and its time-sorted queue then lets a packet
with a small draw overtake an earlier one with a large draw, so jitter reorders packets unless its leaf is
replaced by a plain FIFO (wiki.linuxfoundation.org/networking/netem, "Packet re-ordering" and the FAQ "How to
reorder packets based on jitter?"). A TCP flow that is reordered sees duplicate ACKs and spurious fast
retransmits, which a real WAN path rarely causes, so by default a packet is never released before the packet
of the same flow (protocol, addresses, ports) that came before it: its release time is
max(arrival + delay ± jitter, release of the flow's previous packet). The delay of a flow's packets then still
varies by the jitter, but in order; packets of different flows are independent. `reorder=True` drops the
constraint (netem's behaviour).
"""

from __future__ import annotations

import random

from netem.userspace.table import LinkSpec


class ReleaseModel:
    """Decides, for each packet, its release time (monotonic seconds) or that it is lost."""

    def __init__(self, reorder: bool = False, seed: int | None = None) -> None:
        self.reorder = reorder
        self._rng = random.Random(seed)
        self._last: dict[bytes, float] = {}

    def release_at(self, link: LinkSpec, flow: bytes, now: float) -> float | None:
        """Release time of a packet of `link` and `flow` that arrived at `now`; None to drop it (loss)."""
        rng = self._rng
        if link.loss_pct and rng.random() * 100.0 < link.loss_pct:
            return None
        delay = link.delay_ms
        if link.jitter_ms:
            delay = max(0.0, delay + rng.uniform(-link.jitter_ms, link.jitter_ms))
        at = now + delay / 1000.0
        if not self.reorder:
            key = link.link_id.to_bytes(4, "big") + flow  # on the testbed two links can share the addresses
            last = self._last.get(key)
            if last is not None and last > at:
                at = last
            self._last[key] = at
        return at

    def forget_before(self, now: float) -> None:
        """Forget flows whose last release is past: they can no longer hold anything back."""
        self._last = {k: v for k, v in self._last.items() if v > now}

    @property
    def flows(self) -> int:
        """Flows currently remembered."""
        return len(self._last)
