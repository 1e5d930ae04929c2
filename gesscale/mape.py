"""The Monitor-Analyze-Plan-Execute loop, independent of where the operator runs.

Each period: Monitor asks the backend for an `Observation`; Analyze + Plan ask the policy for a `Decision`
and complete it with the nodes to add or remove (`policies.base.place`); Execute hands the new `Placement` to
the backend — or, in recommend-only mode, only records it. The same loop drives the simulator, the local Spark
testbed and Kubernetes (split after the Flink operator autoscaler: collection, evaluation, decision,
realisation).

Resuming: with a `state_path`, the policy's learned state, the time of the last reconfiguration and any
reconfiguration in flight are written (atomically) after every step. A restarted loop reloads them; a
reconfiguration that was in flight is not repeated if the backend already shows its placement.

Lost replicas, moves (docs/events.md): when an observation lists replicas the backend lost (a crashed node, an
executor declared lost), the period is the replacement's: the policy is not asked (its observation is distorted
by the loss) and as many replicas as were lost are added, placed by the policy's kind of placement, within the
bounds. Otherwise, when the policy keeps the replica count, the loop may move one replica (add the better node
first, then remove the worse one, so capacity never drops): off a node that is no longer schedulable (leaving,
or cut off), or, for a latency-aware policy, when the links of the used nodes degraded since they were placed
(their ND_max rose by more than `move_threshold_ms`: a measured view drifts by tenths of a ms) and one move
lowers ND_max by more than `move_threshold_ms`. When a latency-aware policy asks for a scale-up in
such a period, the loop moves instead (the back pressure may be the degraded links' own: every micro-batch
waits for its slowest executor, and an added replica would leave them in the placement); the next periods say
whether more replicas are still needed (live, issue 32's check: scaling up beside fog1's +60 ms links took the
placement to 4 replicas at about half the throughput of 2). A move needs headroom: with `max_replicas` replicas
already, the loop keeps its placement and says so in the decision's reason (a swap in place would drop capacity
for its pause); it moves at a later period once there is room. Without a spare node there is nothing to move to;
the schedulable nodes bound the replica count, so a replica on a node no longer schedulable is removed (`place`
removes those first). No move during the warm-up.

A rise not yet confirmed: with a measured view of the network (`network_unconfirmed`), a period whose used
links rose in the last round of probes, by more than the move threshold, but not in the view yet (the smoother
takes a step after its second sample), keeps its placement without asking a latency-aware policy (`_held`): its
back pressure may be the rise's own, and the next round says whether to move. A backend that adds before it
removes in one change (`Backend.moves_add_first`, the testbed's live strategy) makes a move in one `apply`;
otherwise the loop applies the grown placement first, then the target.

The network: with `network` (a function of the time the backend reports, e.g. `latency_map.at` in the
simulator, whose clock counts seconds from the start of the run), the policies see the map in force at each
period, as a network monitor would report it; without it, the map given stays in force for the whole run. In
the simulator that is the operator's map (`--latency-source map`) or a map kept from measured RTTs
(`gesscale.measured_latency`; on the local testbed, measured live by `gesscale.testbed.latency_monitor`;
`network_log(t)` gives the changes it logged at t, kept in the period's `StepRecord.network_changes`: the
decision log says when the controller learnt of a change).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gesscale import placement
from gesscale.backend import Backend
from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.measured_latency import LatencyChange
from gesscale.model import PerformanceModel
from gesscale.observation import Decision, NodeState, Observation, Placement, Reconfiguration
from gesscale.policies.base import Policy, PolicyContext, place
from gesscale.site_view import placement_view
from gesscale.state_file import state_for


@dataclass(frozen=True)
class StepRecord:
    """One period: what was observed, what was decided, what changed (None when nothing did)."""

    observation: Observation
    decision: Decision
    reconfiguration: Reconfiguration | None
    applied: bool
    # what the controller's measured view of the network logged this period (`network_log`), before deciding
    network_changes: tuple[LatencyChange, ...] = ()


class ControlLoop:
    """Drives one policy against one backend, period after period."""

    def __init__(
        self,
        backend: Backend,
        policy: Policy,
        latency_map: LatencyMap,
        config: ControllerConfig,
        *,
        oracle_demand: Callable[[float, float], int] | None = None,
        state_path: str | Path | None = None,
        on_step: Callable[[StepRecord], None] | None = None,
        network: Callable[[float], LatencyMap] | None = None,
        network_log: Callable[[float], tuple[LatencyChange, ...]] | None = None,
        network_unconfirmed: Callable[[float], tuple[tuple[str, str], ...]] | None = None,
        input_end_s: float | None = None,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.latency_map = latency_map
        self.network = network
        self.network_log = network_log
        self.network_unconfirmed = network_unconfirmed
        self.current_map = latency_map  # the map in force at the last period
        self.config = config
        # What placement reasons on and the model's latency is measured with: the map (ND_max) or its site view
        # (`model_latency: site`, from the backend's site: the farthest replica's RTT to it)
        self.site = backend.site if config.model_latency == "site" else None
        self.graph = placement_view(latency_map, config.model_latency, self.site)
        self.rng = random.Random(config.seed)
        self.oracle_demand = oracle_demand
        # When the input ends, on the observations' clock: the simulator knows it; None on a live backend, whose
        # stream is taken as unbounded.
        self.input_end_s = input_end_s
        self.state_path = Path(state_path) if state_path else None
        self.on_step = on_step
        self.last_reconfig_s = -float("inf")
        self.history: list[StepRecord] = []
        self._last_nodes: list[NodeState] | None = None
        self._last_candidates: tuple[str, ...] = ()
        self._unschedulable: frozenset[str] = frozenset()  # nodes down or cordoned, as last listed
        self._placed_nd: float | None = None  # the lowest ND_max of the placement in use since it was made
        self.resume_note = ""  # what happened to a state of another policy (gesscale.state_file.state_for)
        if self.state_path and self.state_path.exists():
            self._resume()
        # the model the policy starts from, given or resumed, must be in the loop's latency (its points' labels)
        model = getattr(policy, "model", None)
        if isinstance(model, PerformanceModel):
            try:
                model.use_latency(config.model_latency)
            except ValueError as err:
                raise UserError(str(err)) from None

    # -- persistence -----------------------------------------------------------------------------------
    def _save(self, pending: Placement | None = None, pending_time_s: float | None = None) -> None:
        if not self.state_path:
            return
        state: dict[str, Any] = {
            "policy": self.policy.id,
            "policy_state": self.policy.state_dict(),
            "last_reconfig_s": None if self.last_reconfig_s == -float("inf") else self.last_reconfig_s,
            "pending": None if pending is None else {"nodes": list(pending.nodes), "nd_max_ms": pending.nd_max_ms,
                                                     "time_s": pending_time_s},
            "rng": _rng_state(self.rng),
        }
        tmp = self.state_path.with_suffix(".tmp")
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.state_path)

    def _resume(self) -> None:
        assert self.state_path is not None
        state, self.resume_note = state_for(self.state_path, self.policy.id)
        if state is None:  # another policy's state, now kept beside: this policy starts afresh
            self._save()
            return
        self.policy.load_state_dict(state.get("policy_state") or {})
        if state.get("last_reconfig_s") is not None:
            self.last_reconfig_s = float(state["last_reconfig_s"])
        if state.get("rng"):
            self.rng.setstate(_rng_from_state(state["rng"]))
        pending = state.get("pending")
        # A change the previous controller made but did not record (it died during `apply`) counts as done when
        # the backend shows it: the warm-up runs from when it was made, so it is not made a second time.
        if pending and pending.get("time_s") is not None and set(self.backend.current().nodes) == set(pending["nodes"]):
            self.last_reconfig_s = float(pending["time_s"])
        # Otherwise the change never took effect: the loop plans again from what the backend shows.
        self._save()

    # -- the loop ----------------------------------------------------------------------------------------
    def context(self, now_s: float, obs: Observation | None = None) -> PolicyContext:
        """What the policy may know at time `now_s`."""
        self._follow_network(now_s)
        candidates = self._candidates(self.backend.nodes())
        return PolicyContext(
            graph=self.graph,
            candidates=candidates,
            config=self.config,
            rng=self.rng,
            since_reconfig_s=now_s - self.last_reconfig_s,
            catching_up=obs is not None and obs.backlog_growth < 0,
            oracle_demand=self.oracle_demand,
            input_end_s=self.input_end_s,
        )

    def _candidates(self, nodes: list[NodeState]) -> tuple[str, ...]:
        """The schedulable nodes of the map, as one tuple reused while they do not change (placement caches by it:
        on a large map, turning names into a mask every period would cost more than the decision)."""
        last = self._last_nodes
        if last is None or len(last) != len(nodes) or not all(a is b for a, b in zip(nodes, last, strict=True)):
            self._last_nodes = list(nodes)  # NodeState is frozen: the same objects are the same states
            self._last_candidates = tuple(n.name for n in nodes if n.schedulable and n.name in self.latency_map.nodes)
            self._unschedulable = frozenset(n.name for n in nodes if not n.schedulable)
        return self._last_candidates

    def step(self) -> StepRecord:
        """Monitor, analyse, plan and execute one period."""
        obs = self.backend.observe()
        ctx = self.context(obs.time_s, obs)
        if self.site is not None:  # the period's point for the model, in the model's latency
            obs = replace(obs, nd_max_ms=placement.nd_max(self.graph, obs.replicas),
                          extra={**obs.extra, "placement_nd_max_ms": obs.nd_max_ms})
        if obs.lost:
            decision = self._replace(obs, ctx)
        elif (held := self._held(obs)) is not None:
            decision = held
        else:
            decision = place(self.policy.decide(obs, ctx), obs.replicas, ctx, self.policy.latency_aware)
            if not decision.add and not decision.remove and not ctx.in_warmup:
                decision = self._move(obs, ctx, decision)
            elif decision.add and not decision.remove and not ctx.in_warmup and self.policy.latency_aware:
                # A scale-up asked for while a used node's links degraded: the back pressure may be the degraded
                # links' own (every micro-batch waits for its slowest executor), and a replica added beside them
                # would keep them in the placement. Move first; the next periods say whether more are needed.
                moved = self._move(obs, ctx, decision)
                if moved.remove:
                    decision = Decision(moved.target, f"{moved.reason}, instead of scaling up", add=moved.add,
                                        remove=moved.remove)
        reconf: Reconfiguration | None = None
        applied = False
        if decision.add or decision.remove:
            nodes = tuple(n for n in obs.replicas if n not in decision.remove) + decision.add
            target = Placement(nodes, placement.nd_max(self.graph, nodes))
            move = bool(decision.add and decision.remove)
            reconf = Reconfiguration(
                time_s=obs.time_s,
                kind="move" if move else "up" if decision.add else "down",
                added=decision.add,
                removed=decision.remove,
                nodes=nodes,
                nd_max_ms=target.nd_max_ms,
                pause_s=0.0,
                reason=decision.reason,
            )
            if not self.config.recommend_only:
                pause = 0.0
                if move and not self.backend.moves_add_first:  # add first, then remove: capacity never drops
                    grown = obs.replicas + decision.add
                    self._save(pending=Placement(grown, placement.nd_max(self.graph, grown)), pending_time_s=obs.time_s)
                    pause += self.backend.apply(Placement(grown, placement.nd_max(self.graph, grown)),
                                                instant=self.policy.instant)
                self._save(pending=target, pending_time_s=obs.time_s)
                pause += self.backend.apply(target, instant=self.policy.instant)
                self.last_reconfig_s = obs.time_s
                self._placed_nd = target.nd_max_ms
                reconf = Reconfiguration(**{**reconf.__dict__, "pause_s": pause})
                applied = True
        self._save()
        logged = self.network_log(obs.time_s) if self.network_log is not None else ()
        record = StepRecord(obs, decision, reconf, applied, logged)
        self.history.append(record)
        if self.on_step:
            self.on_step(record)
        return record

    def _held(self, obs: Observation) -> Decision | None:
        """The decision of a period whose used links rose in the last round of probes without the measured view
        having taken the rise yet (`network_unconfirmed`): keep the placement and do not ask the policy; or None.

        The period's back pressure may be the rise's own (every micro-batch waits for its slowest executor): a
        policy asked now would learn a point labelled with the old ND_max and scale up beside the degraded
        links, and a live scale-up blocks the loop for tens of seconds, past the round that confirms the rise and
        would have moved the replica instead (live, issue 32: the period 7 s after fog1's +60 ms scaled up to a
        third node, and the move followed 51 s later). The cost: one period's delay when the rise was a single
        outlier. Only for a latency-aware policy, and only for pairs of used nodes (they make ND_max); the
        threshold is the move's."""
        if self.network_unconfirmed is None or not self.policy.latency_aware or obs.n < 2:
            return None
        used = set(obs.replicas)
        rose = [p for p in self.network_unconfirmed(self.config.move_threshold_ms) if p[0] in used and p[1] in used]
        if not rose:
            return None
        pairs = ", ".join(f"{a}-{b}" for a, b in rose)
        return Decision(obs.n, f"hold: the links {pairs} rose by more than {self.config.move_threshold_ms:g} ms in "
                               "the last round of probes, not confirmed yet; the policy decides at the next period")

    def _replace(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """The decision of a period in which replicas were lost: add as many, placed as the policy places."""
        lost = ", ".join(obs.lost)
        wanted = Decision(obs.n + len(obs.lost), f"replace {len(obs.lost)} lost replica(s) ({lost})")
        decision = place(wanted, obs.replicas, ctx, self.policy.latency_aware)
        if not decision.add:
            return Decision(obs.n, f"{wanted.reason}: no schedulable node free")
        return decision

    def _move(self, obs: Observation, ctx: PolicyContext, decision: Decision) -> Decision:
        """One replica moved (see the module docstring), or `decision` as it was (its reason saying why a move
        was wanted but not made)."""
        current = obs.replicas
        stranded = [n for n in current if n in self._unschedulable]
        nd_now = placement.nd_max(ctx.graph, current) if self.policy.latency_aware and len(current) > 1 else 0.0
        placed = nd_now if self._placed_nd is None else min(self._placed_nd, nd_now)
        self._placed_nd = placed
        threshold = self.config.move_threshold_ms
        if stranded:
            remove = stranded[0]
            rest = [n for n in current if n != remove]
            pool = [c for c in ctx.candidates if c not in current]
            add = (placement.grow(ctx.graph, rest, pool, 1) if self.policy.latency_aware
                   else placement.grow_random(rest, pool, 1, ctx.rng))
            why = f"move off {remove} (no longer schedulable: leaving or cut off)"
            if not add:  # no spare node: the schedulable nodes bound the count, so `place` removed it already
                return decision
            found: tuple[str, str] | None = (add[0], remove)
        else:
            if nd_now <= placed + threshold:
                return decision  # the used nodes' links did not degrade, beyond the noise, since they were placed
            best = placement.better_move(ctx.graph, current, ctx.candidates, threshold)
            if best is None:
                return decision
            found = (best[0], best[1])
            why = (f"move {best[1]} -> {best[0]}: ND_max {best[2]:g} -> {best[3]:g} ms (links degraded; "
                   f"threshold {threshold:g} ms)")
        if self.config.max_replicas and len(current) + 1 > self.config.max_replicas:
            return Decision(decision.target, _joined(decision.reason, f"{why} blocked: no headroom under "
                                                     f"max_replicas {self.config.max_replicas} (add first, then "
                                                     "remove)"))
        return Decision(len(current), _joined(decision.reason, why), add=(found[0],), remove=(found[1],))

    def _follow_network(self, now_s: float) -> None:
        """Take the map in force at `now_s` (and its graph, rebuilt only when the map changed)."""
        if self.network is None:
            return
        lmap = self.network(now_s)
        if lmap is not self.current_map:
            self.current_map = lmap
            self.graph = placement_view(lmap, self.config.model_latency, self.site)

    def run(self, max_steps: int | None = None, until: Callable[[], bool] | None = None) -> list[StepRecord]:
        """Step until the backend has finished, `until()` is true (asked after each period) or `max_steps`."""
        steps = 0
        while not self.backend.finished and (until is None or not until()) \
                and (max_steps is None or steps < max_steps):
            self.step()
            steps += 1
        return self.history


def _joined(reason: str, more: str) -> str:
    return f"{reason}; {more}" if reason else more


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_state(state: list[Any]) -> tuple[Any, ...]:
    return (state[0], tuple(state[1]), state[2])
