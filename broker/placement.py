"""Choosing the host broker of a new profile; strategies are pluggable by name.

``round-robin`` spreads profiles evenly: the broker hosting the fewest profiles
(ties by id), which is round robin while nothing is deleted and stays balanced when
profiles go away. ``nearest`` takes the broker closest to the subscriber: the broker it
names (``near``), else the one nearest its ``location`` among brokers that have one,
else it falls back to ``round-robin``. ``pep`` hosts a profile with the profiles it
excludes least: PEP partitioning (:class:`partitioning.PepHosts`, ONYX section 4.4)
puts it in the partition of one of its exclusiveness-pattern values and returns that
partition's broker (partitions placed by broker ``capacity`` and distance to the
sources' roots). A PEP strategy is stateful: the registration service restores it
from its store at start, tells it about deletions, and asks it to ``rebalance`` when
the population has drifted (the moves it returns are applied by the service).

>>> from routing.overlay import builtin
>>> overlay = builtin()
>>> make_strategy("round-robin", overlay).choose(PlacementRequest(overlay, counts={"b1": 2, "b2": 1}))
'b3'
>>> make_strategy("nearest", overlay).choose(PlacementRequest(overlay, near="b5"))
'b5'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker import config
from partitioning import PepHosts
from partitioning.placement import Move
from routing.overlay import Overlay


class PlacementError(ValueError):
    """A placement request that cannot be honoured (unknown strategy or broker)."""


@dataclass(frozen=True)
class PlacementRequest:
    """What a strategy may look at: the overlay, current load, the subscriber's hints
    and the profile itself (content-aware strategies such as PEP use the text)."""

    overlay: Overlay
    counts: dict[str, int] = field(default_factory=dict)
    near: str | None = None
    location: tuple[float, float] | None = None
    text: str | None = None
    profile_id: str | None = None


class Strategy:
    """A host-choice strategy. Stateless ones only implement :meth:`choose`."""

    def choose(self, req: PlacementRequest) -> str:
        raise NotImplementedError

    def restore(self, profiles: Iterable[tuple[str, str, str]]) -> None:
        """Learn the registered ``(profile id, text, host)`` population (at start)."""

    def forget(self, profile_id: str) -> None:
        """A profile was deleted."""

    def rebalance(self) -> list[Move]:
        """Profile moves that would restore a good placement (none by default)."""
        return []


def round_robin(req: PlacementRequest) -> str:
    return min(req.overlay.brokers, key=lambda b: (req.counts.get(b, 0), b))


def nearest(req: PlacementRequest) -> str:
    if req.near is not None:
        if req.near not in req.overlay.graph:
            raise PlacementError(f"'near' names unknown broker {req.near!r}; brokers: {req.overlay.brokers}")
        return req.near
    if req.location is not None:
        located = [(b, req.overlay.attrs(b).get("location")) for b in req.overlay.brokers]
        located = [(b, loc) for b, loc in located if loc]
        if located:
            return min(located, key=lambda bl: (math.dist(bl[1], req.location), bl[0]))[0]
    return round_robin(req)


class Stateless(Strategy):
    """A strategy that is a plain function of the request."""

    def __init__(self, choose: Callable[[PlacementRequest], str]) -> None:
        self._choose = choose

    def choose(self, req: PlacementRequest) -> str:
        return self._choose(req)


class Pep(Strategy):
    """PEP host choice over one overlay (see module docstring)."""

    def __init__(self, overlay: Overlay) -> None:
        self.hosts = PepHosts.from_graph(overlay.graph, overlay.sources.values(),
                                         partitions_per_broker=config.PEP_PARTITIONS_PER_BROKER,
                                         tolerance=config.PEP_TOLERANCE)
        self._anonymous = 0

    def choose(self, req: PlacementRequest) -> str:
        if req.text is None:
            return round_robin(req)
        pid = req.profile_id
        if pid is None:  # a caller that only wants an answer: name it within PEP's population
            self._anonymous += 1
            pid = f"anonymous-{self._anonymous}"
        return self.hosts.place(pid, req.text)

    def restore(self, profiles: Iterable[tuple[str, str, str]]) -> None:
        self.hosts.restore(profiles)

    def forget(self, profile_id: str) -> None:
        self.hosts.remove(profile_id)

    def rebalance(self) -> list[Move]:
        return self.hosts.rebalance()


STRATEGIES: dict[str, Callable[[Overlay], Strategy]] = {
    "round-robin": lambda overlay: Stateless(round_robin),
    "nearest": lambda overlay: Stateless(nearest),
    "pep": Pep,
}
"""Strategy factories by name; each service (overlay) gets its own instance."""


def register_strategy(name: str, factory: Callable[[Overlay], Strategy]) -> None:
    """Make another strategy selectable by name."""
    STRATEGIES[name] = factory


def make_strategy(name: str, overlay: Overlay) -> Strategy:
    """A fresh instance of strategy ``name`` for ``overlay``."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise PlacementError(f"unknown placement strategy {name!r}; choose from {sorted(STRATEGIES)}") from None
    return factory(overlay)
