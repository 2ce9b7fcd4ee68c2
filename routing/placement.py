"""Where a profile is hosted: the placement strategies of the registration service and
the routing simulator, by name in :data:`STRATEGIES`.

A strategy is made for one overlay (:func:`make_strategy`) and answers
:meth:`Strategy.choose` for a :class:`PlacementRequest` (the profile's id and text, the
subscriber's hints and, when the caller knows it, the load per broker) with a host broker.

* ``round-robin`` -- the broker hosting the fewest profiles (ties by id): round robin
  while nothing is deleted, balanced when profiles go away. The load is the request's
  ``counts`` (the service's: its store) or else the profiles the strategy placed.
* ``nearest`` -- the broker the subscriber names (``near``), else the one nearest its
  ``location`` among brokers that have one, else ``round-robin``.
* ``random`` -- a broker drawn uniformly at random (seeded): the baseline.
* ``pep`` -- the profile joins the profiles it excludes least: PEP partitioning
  (ONYX section 4.4, :class:`partitioning.PepHosts`) puts it in the partition of one of
  its exclusiveness-pattern values and returns that partition's broker; partitions are
  placed by broker ``capacity`` and distance to the sources' root brokers.

Strategies keep state: the registration service restores it from its store at start
(:meth:`~Strategy.restore`), tells it about deletions (:meth:`~Strategy.forget`) and
asks for moves when the population has drifted (:meth:`~Strategy.rebalance`; only
``pep`` moves profiles). Tuning comes from the caller as :class:`PlacementOptions`:
the service passes :mod:`broker.config`'s, the simulator its seed and message schema.
A :data:`Placement` is any function from a request to a host, such as a strategy's
``choose``; the simulator takes one as a hook.

>>> from routing.overlay import builtin
>>> overlay = builtin()
>>> make_strategy("round-robin", overlay).choose(PlacementRequest("p1", "/nitf", counts={"b1": 2, "b2": 1}))
'b3'
>>> make_strategy("nearest", overlay).choose(PlacementRequest("p1", "/nitf", near="b5"))
'b5'

PEP (ONYX 4.4): once two values of ``@version`` have been seen, profiles asking for
the same value share a broker, and different values spread over brokers.

>>> pep = make_strategy("pep", overlay, PlacementOptions(partitions_per_broker=1))
>>> hosts = [pep.choose(PlacementRequest(f"p{i}", f"/nitf[@version = 'v{i % 3}']")) for i in range(9)]
>>> hosts[3:6] == hosts[6:9], len(set(hosts[6:9]))
(True, 3)
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from partitioning import Move, PepHosts
from partitioning.occurrence import SchemaOccurrence
from routing.overlay import Overlay

if TYPE_CHECKING:
    from yfilter.generators import Schema


class PlacementError(ValueError):
    """A placement request that cannot be honoured (unknown strategy or broker)."""


@dataclass(frozen=True)
class PlacementRequest:
    """What a strategy may look at: the profile (content-aware strategies such as PEP
    read its text), the subscriber's hints (a broker it is ``near``, its ``location``)
    and the profiles per broker as the caller knows them (``counts``; ``None``: the
    strategy's own tally)."""

    profile_id: str
    text: str
    near: str | None = None
    location: tuple[float, float] | None = None
    counts: Mapping[str, int] | None = None


Placement = Callable[[PlacementRequest], str]
"""A host choice as a plain function, e.g. :meth:`Strategy.choose`."""


@dataclass(frozen=True)
class PlacementOptions:
    """Tuning of the strategies, given by their user: ``seed`` of ``random``; PEP's
    ``partitions_per_broker``, balance ``tolerance`` and the messages' ``schema``
    (which patterns occur at most once per message; none: learned from profiles)."""

    seed: int = 0
    partitions_per_broker: int = 4
    tolerance: float = 0.1
    schema: Schema | None = None


class Strategy:
    """A host choice on one overlay; only :meth:`choose` is required."""

    def __init__(self, overlay: Overlay) -> None:
        self.overlay = overlay

    def choose(self, req: PlacementRequest) -> str:
        raise NotImplementedError

    def restore(self, placed: Iterable[tuple[str, str, str]]) -> None:
        """Learn the registered ``(profile id, text, host)`` population (at start)."""

    def forget(self, profile_id: str) -> None:
        """A profile was deleted."""

    def rebalance(self) -> list[Move]:
        """Profile moves that would restore a good placement (none by default)."""
        return []


class RoundRobin(Strategy):
    """``round-robin``: the least loaded broker (see the module docstring)."""

    def __init__(self, overlay: Overlay) -> None:
        super().__init__(overlay)
        self.hosts: dict[str, str] = {}
        self.load: Counter[str] = Counter()

    def choose(self, req: PlacementRequest) -> str:
        host = self.pick(req)
        self.forget(req.profile_id)
        self.hosts[req.profile_id] = host
        self.load[host] += 1
        return host

    def pick(self, req: PlacementRequest) -> str:
        load = self.load if req.counts is None else req.counts
        return min(self.overlay.brokers, key=lambda b: (load.get(b, 0), b))

    def restore(self, placed: Iterable[tuple[str, str, str]]) -> None:
        for pid, _, host in placed:
            self.forget(pid)
            self.hosts[pid] = host
            self.load[host] += 1

    def forget(self, profile_id: str) -> None:
        old = self.hosts.pop(profile_id, None)
        if old is not None:
            self.load[old] -= 1


class Nearest(RoundRobin):
    """``nearest``: the subscriber's broker or location, else round robin."""

    def pick(self, req: PlacementRequest) -> str:
        if req.near is not None:
            if req.near not in self.overlay.graph:
                raise PlacementError(f"'near' names unknown broker {req.near!r}; brokers: {self.overlay.brokers}")
            return req.near
        if req.location is not None:
            located = [(b, self.overlay.attrs(b).get("location")) for b in self.overlay.brokers]
            located = [(b, loc) for b, loc in located if loc]
            if located:
                return min(located, key=lambda bl: (math.dist(bl[1], req.location), bl[0]))[0]
        return super().pick(req)


class Random(Strategy):
    """``random``: a uniformly random broker, seeded."""

    def __init__(self, overlay: Overlay, seed: int) -> None:
        super().__init__(overlay)
        self.rng = random.Random(seed)
        self.pool = sorted(overlay.brokers)

    def choose(self, req: PlacementRequest) -> str:
        return self.rng.choice(self.pool)


class Pep(Strategy):
    """``pep``: PEP host choice (ONYX 4.4) over one overlay's brokers."""

    def __init__(self, overlay: Overlay, options: PlacementOptions) -> None:
        super().__init__(overlay)
        schema = options.schema
        self.hosts = PepHosts.from_graph(overlay.graph, overlay.sources.values(),
                                         partitions_per_broker=options.partitions_per_broker,
                                         tolerance=options.tolerance,
                                         occurrence=SchemaOccurrence.from_schema(schema) if schema else None,
                                         namespaces=schema.namespaces if schema else None)

    def choose(self, req: PlacementRequest) -> str:
        return self.hosts.place(req.profile_id, req.text)

    def restore(self, placed: Iterable[tuple[str, str, str]]) -> None:
        self.hosts.restore(placed)

    def forget(self, profile_id: str) -> None:
        self.hosts.remove(profile_id)

    def rebalance(self) -> list[Move]:
        return self.hosts.rebalance()


STRATEGIES: dict[str, Callable[[Overlay, PlacementOptions], Strategy]] = {
    "nearest": lambda overlay, options: Nearest(overlay),
    "round-robin": lambda overlay, options: RoundRobin(overlay),
    "random": lambda overlay, options: Random(overlay, options.seed),
    "pep": Pep,
}
"""Strategy factories by name; every user (service, simulation) makes its own instance."""


def make_strategy(name: str, overlay: Overlay, options: PlacementOptions = PlacementOptions()) -> Strategy:
    """A fresh instance of strategy ``name`` (one of :data:`STRATEGIES`) for ``overlay``."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise PlacementError(f"unknown placement strategy {name!r}; choose from {sorted(STRATEGIES)}") from None
    return factory(overlay, options)
