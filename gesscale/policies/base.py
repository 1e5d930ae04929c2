"""The policy interface and the registry of policy ids.

A policy sees one `Observation` per control period plus a `PolicyContext` (placement graph, schedulable nodes,
bounds, seeded RNG, time since the last reconfiguration) and returns a `Decision`. It may name the nodes to add
or remove; if it does not, `place` fills them in — latency-aware policies with the networkx placement of
`gesscale.placement`, latency-unaware ones with the seeded random choice. Policies keep their learned state
(e.g. the performance model) in `state_dict()` so a restarted controller resumes where it stopped.

Register a policy with `@register`; its `id` is what the CLI accepts (`--policies gesscale,ds2`). A policy from
outside the package is named by its file and class, `--policy path/to/my_policy.py:MyPolicy` (docs/policies.md).
"""

from __future__ import annotations

import importlib
import pkgutil
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gesscale import placement
from gesscale.config import ControllerConfig
from gesscale.errors import UserError
from gesscale.names import check_name, is_name
from gesscale.observation import Decision, Observation


@dataclass
class PolicyContext:
    """What a policy may know besides the observation."""

    graph: Any  # the placement graph: nx.Graph for a small map, else the LatencyMap read by rows (placement.py)
    candidates: tuple[str, ...]
    config: ControllerConfig
    rng: random.Random
    since_reconfig_s: float = float("inf")
    # The backlog shrank over the last period: the operator is catching up (e.g. after a pause).
    catching_up: bool = False
    # The oracle (ideal policy only): the ideal replica count for the next period.
    oracle_demand: Callable[[float, float], int] | None = None
    # When the input ends, on the clock of `Observation.time_s`: known in the simulator (a finite scenario); None
    # on a live backend, whose stream is taken as unbounded.
    input_end_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_max(self) -> int:
        """Upper bound on replicas: the configured maximum (0: no maximum), capped by the schedulable nodes."""
        return max(1, min(self.config.max_replicas or len(self.candidates), len(self.candidates)))

    @property
    def n_min(self) -> int:
        """Lower bound on replicas."""
        return min(self.config.min_replicas, self.n_max)

    def clamp(self, n: int) -> int:
        """n bounded to [n_min, n_max]."""
        return max(self.n_min, min(self.n_max, int(n)))

    @property
    def in_warmup(self) -> bool:
        """Whether the last reconfiguration is too recent for a decision (`warmup_s`)."""
        return self.since_reconfig_s < self.config.warmup_s


class Policy(ABC):
    """An autoscaling policy: observation in, target replica count (and maybe nodes) out."""

    id: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    latency_aware: ClassVar[bool] = True
    # Reconfigurations of this policy take no time (the oracle); every other policy pays the backend's pause.
    instant: ClassVar[bool] = False
    # Its options are its constructor's keyword arguments (name, type, default); `option_help` gives each a
    # line for `gesscale options`, `option_bounds` a range other than the default (`gesscale.options`).
    option_help: ClassVar[dict[str, str]] = {}
    option_bounds: ClassVar[dict[str, tuple]] = {}

    @abstractmethod
    def decide(self, obs: Observation, ctx: PolicyContext) -> Decision:
        """The replica count wanted for the next period."""

    def state_dict(self) -> dict[str, Any]:
        """Learned state to persist across controller restarts (empty by default)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what `state_dict` returned."""

    def model_summary(self) -> dict[str, Any] | None:
        """The performance model's parameters, for reports, when the policy has one."""
        return None


_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available under its `id`."""
    if not cls.id or not is_name("policy", cls.id):
        raise ValueError(f"{cls.__name__} has no id, or one outside the name rule (gesscale.names)")
    if cls.id in _REGISTRY and _REGISTRY[cls.id] is not cls:
        raise ValueError(f"policy id {cls.id!r} registered twice")
    _REGISTRY[cls.id] = cls
    return cls


def _load_all() -> None:
    import gesscale.policies as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name != "base":
            importlib.import_module(f"gesscale.policies.{info.name}")


def policy_ids() -> list[str]:
    """Every registered policy id, in registration-independent (sorted) order."""
    _load_all()
    return sorted(_REGISTRY)


def describe_policies() -> list[tuple[str, str]]:
    """(id, one-line summary) of every policy."""
    _load_all()
    return [(pid, _REGISTRY[pid].summary) for pid in sorted(_REGISTRY)]


_PLUGINS: dict[str, str] = {}  # "path/to/file.py:ClassName" -> the id it registered


def is_plugin_spec(text: str) -> bool:
    """True for `path/to/file.py:ClassName` (a policy from outside the package) rather than an id."""
    path, sep, name = text.rpartition(":")
    return bool(sep and path.endswith(".py") and name)


def load_plugin(spec: str) -> str:
    """Import the policy class named by `path/to/file.py:ClassName`, register it, and return its id.

    The class must subclass `Policy` and set an `id` that no built-in policy uses; every problem is one
    `UserError`. Loading the same spec again returns the same id.
    """
    if spec in _PLUGINS:
        return _PLUGINS[spec]
    from pathlib import Path

    from gesscale.user_module import import_file

    _load_all()
    path_text, _, name = spec.rpartition(":")
    module = import_file(Path(path_text).expanduser(), f"policy plug-in {spec!r}")
    path = Path(path_text)
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise UserError(f"policy plug-in {spec!r}: {path.name} has no Policy subclass named {name!r}")
    if not cls.id or not isinstance(cls.id, str):
        raise UserError(f"policy plug-in {spec!r}: {name} must set a class attribute id = \"my-policy\"")
    check_name("policy", cls.id, f"policy plug-in {spec!r}: id")  # bundles and time series are named after it
    if cls.id in _REGISTRY and _REGISTRY[cls.id] is not cls:
        raise UserError(f"policy plug-in {spec!r}: id {cls.id!r} is already a policy; choose another")
    _REGISTRY[cls.id] = cls
    _PLUGINS[spec] = cls.id
    return cls.id


def loaded_plugins() -> list[str]:
    """The plug-in specs loaded in this process (worker processes load them again)."""
    return list(_PLUGINS)


def policy_class(policy_id: str) -> type[Policy]:
    """The class behind a policy id or a plug-in spec (`file.py:Class`); an unknown id is a `UserError` listing
    the known ones."""
    _load_all()
    if is_plugin_spec(policy_id):
        policy_id = load_plugin(policy_id)
    cls = _REGISTRY.get(policy_id)
    if cls is None:
        raise UserError(f"unknown policy {policy_id!r}; known policies: {', '.join(sorted(_REGISTRY))}")
    return cls


def make_policy(policy_id: str, **options: Any) -> Policy:
    """A fresh policy instance from an id or a plug-in spec (`file.py:Class`) with its constructor `options`."""
    return policy_class(policy_id)(**options)


def parse_policy_list(text: str) -> list[str]:
    """`a,b,c` or `all` into validated policy ids (unknown ids raise `UserError`); an item may be a plug-in
    spec `path/to/file.py:ClassName`, which is loaded and replaced by its id."""
    ids = [p.strip() for p in text.split(",") if p.strip()]
    ids = [load_plugin(p) if is_plugin_spec(p) else p for p in ids]
    known = policy_ids()
    if text.strip() == "all":
        return known
    if not ids:
        raise UserError("no policy given")
    for pid in ids:
        if pid not in known:
            raise UserError(f"unknown policy {pid!r}; known policies: {', '.join(known)}")
    return ids


def place(decision: Decision, current: tuple[str, ...], ctx: PolicyContext, latency_aware: bool) -> Decision:
    """Complete a decision with the nodes to add or remove, using the policy's kind of placement; a scale-down
    removes first the replicas on nodes no longer schedulable (down, cordoned, leaving, cut off)."""
    target = ctx.clamp(decision.target)
    n = len(current)
    if target == n:
        return Decision(n, decision.reason)
    if target > n:
        k = target - n
        if decision.add:
            add = tuple(decision.add[:k])
        elif latency_aware:
            add = tuple(placement.grow(ctx.graph, current, ctx.candidates, k))
        else:
            add = tuple(placement.grow_random(current, ctx.candidates, k, ctx.rng))
        return Decision(n + len(add), decision.reason, add=add)
    k = n - target
    free = set(ctx.candidates)
    stranded = tuple(c for c in current if c not in free)  # on a node down or cordoned: they go first
    if decision.remove:
        remove = tuple(decision.remove[:k])
    elif stranded:
        rest = tuple(c for c in current if c in free)
        more = k - len(stranded[:k])
        extra = () if more <= 0 else tuple(placement.shrink(ctx.graph, rest, more) if latency_aware
                                           else placement.shrink_random(rest, more, ctx.rng))
        remove = stranded[:k] + extra
    elif latency_aware:
        remove = tuple(placement.shrink(ctx.graph, current, k))
    else:
        remove = tuple(placement.shrink_random(current, k, ctx.rng))
    return Decision(n - len(remove), decision.reason, remove=remove)
