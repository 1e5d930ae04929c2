"""The narrow interface every backend implements (simulator, local Spark testbed, Kubernetes).

The MAPE loop only ever calls these methods, so one controller drives all three. `observe` blocks until the
end of the next control period (the simulator just advances its clock); `apply` returns once the new placement
is effective and reports the processing pause it caused.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from gesscale.errors import UserError
from gesscale.observation import NodeState, Observation, Placement

# How a live backend reconfigures (`apply`): `live` adds and removes executors while the job runs; `restart`
# stops the job, changes its nodes and starts it again from its checkpoint. Both live backends accept these.
STRATEGIES = ("live", "restart")


class ReconfigurationFailed(UserError):
    """`apply` could not make the placement effective and undid what it had changed.

    A live runner (`gesscale.runner`) reports it and plans again at the next period: the cluster is left as
    `current()` showed it before the call. Each live backend raises its own subclass.
    """


class ObservationUnavailable(UserError):
    """`observe` got nothing to measure during a whole control period, so no decision can be taken on it.

    A live runner reports it and observes again at the next period.
    """


class Backend(ABC):
    """Where the operator runs: list nodes, observe a period, apply a placement."""

    @abstractmethod
    def nodes(self) -> list[NodeState]:
        """Every node of the cluster with its state (down or cordoned nodes are never chosen)."""

    @abstractmethod
    def current(self) -> Placement:
        """The nodes hosting replicas now."""

    # A placement that adds and removes nodes at once is applied adding first, then removing (capacity never
    # drops), in one change: the loop then makes a move in one `apply` (else in two: the grown placement, then
    # the target).
    moves_add_first: bool = False

    # The node of the input broker and the job's driver, where it is known (the testbed's WAN site, a scenario's
    # cluster.site): what the controller's `model_latency: site` measures the placements' latency from.
    site: str | None = None

    @abstractmethod
    def observe(self) -> Observation:
        """Measure the next control period (blocks until it has passed); `ObservationUnavailable` if nothing was."""

    @abstractmethod
    def apply(self, placement: Placement, instant: bool = False) -> float:
        """Make `placement` effective; returns the processing pause it caused (s); `ReconfigurationFailed` if not.

        `instant` asks for a reconfiguration without pause; only the simulator can honour it (the oracle).
        """

    @property
    @abstractmethod
    def finished(self) -> bool:
        """True when there is nothing left to observe (input ended and drained, or the run was stopped)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend started (processes, cgroups); the simulator has nothing to release."""
