"""Choosing the host broker of a new profile; strategies are pluggable by name.

``round-robin`` spreads profiles evenly: the broker hosting the fewest profiles
(ties by id), which is round robin while nothing is deleted and stays balanced when
profiles go away. ``nearest`` takes the broker closest to the subscriber: the broker it
names (``near``), else the one nearest its ``location`` among brokers that have one,
else it falls back to ``round-robin``. ``pep`` hosts a profile with the profiles it
excludes least: PEP partitioning (:class:`partitioning.PepHosts`, ONYX section 4.4)
puts it in the partition of one of its exclusiveness-pattern values and returns that
partition's broker (partitions placed by broker ``capacity`` and distance to the
sources' roots); it learns the patterns from the profiles this process has placed.

>>> from routing.overlay import builtin
>>> choose_host("round-robin", PlacementRequest(builtin(), counts={"b1": 2, "b2": 1}))
'b3'
>>> choose_host("nearest", PlacementRequest(builtin(), near="b5"))
'b5'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable
from weakref import WeakKeyDictionary

from broker import config
from partitioning import PepHosts
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


Strategy = Callable[[PlacementRequest], str]


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


_PEP: WeakKeyDictionary[Overlay, PepHosts] = WeakKeyDictionary()


def pep(req: PlacementRequest) -> str:
    """PEP host choice, with one :class:`partitioning.PepHosts` per overlay object
    (rebuilt, same population, when its brokers change). It sees registrations only:
    deleted profiles stay in its statistics, and a restarted service starts empty."""
    if req.text is None:
        return round_robin(req)
    hosts = _PEP.get(req.overlay)
    if hosts is None or hosts.brokers != req.overlay.brokers:
        fresh = PepHosts.from_graph(req.overlay.graph, req.overlay.sources.values(),
                                    partitions_per_broker=config.PEP_PARTITIONS_PER_BROKER,
                                    tolerance=config.PEP_TOLERANCE)
        for pid, eqs in (hosts.partitioner.profiles.items() if hosts else ()):
            fresh.place_equalities(pid, eqs)  # the overlay changed: same population, new brokers
        hosts = _PEP[req.overlay] = fresh
    # The request carries no profile id yet; a sequence number names it in PEP's population.
    return hosts.place(f"registration-{len(hosts.hosts)}", req.text)


STRATEGIES: dict[str, Strategy] = {"round-robin": round_robin, "nearest": nearest, "pep": pep}


def register_strategy(name: str, strategy: Strategy) -> None:
    """Make another strategy (e.g. PEP) selectable by name."""
    STRATEGIES[name] = strategy


def choose_host(strategy: str, req: PlacementRequest) -> str:
    try:
        chooser = STRATEGIES[strategy]
    except KeyError:
        raise PlacementError(f"unknown placement strategy {strategy!r}; choose from {sorted(STRATEGIES)}") from None
    return chooser(req)
