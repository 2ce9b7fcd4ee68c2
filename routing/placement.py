"""Where a profile is hosted: placement hooks for the simulator.

A :data:`Placement` is any function from a :class:`Subscription` (profile id, text,
and the broker nearest to the subscriber) to the id of the host broker. Three ship
here, by name in :data:`PLACEMENTS` (:func:`by_name`): ``nearest``, ``random`` and
``pep``, PEP partitioning by exclusiveness patterns (:class:`partitioning.PepHosts`).

>>> s = Subscription("p1", "/nitf", home="b7")
>>> nearest(s), random_placement(["b1", "b2"], seed=3)(s) in ("b1", "b2")
('b7', True)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Sequence

from partitioning import PepHosts
from partitioning.occurrence import SchemaOccurrence
from routing.overlay import Overlay
from yfilter.generators import Schema


@dataclass(frozen=True)
class Subscription:
    """A profile to place: its id, its text, and the subscriber's nearest broker."""

    profile_id: str
    text: str
    home: str


Placement = Callable[[Subscription], str]


def nearest(sub: Subscription) -> str:
    """Host the profile at the broker nearest to its subscriber (geographic placement)."""
    return sub.home


def random_placement(brokers: Sequence[str], seed: int = 0) -> Placement:
    """Host each profile at a broker drawn uniformly at random (seeded)."""
    rng = random.Random(seed)
    pool = sorted(brokers)

    def place(sub: Subscription) -> str:
        return rng.choice(pool)

    return place


def pep_placement(overlay: Overlay, schema: Schema | None = None, partitions_per_broker: int = 4) -> Placement:
    """Host each profile by PEP: in the partition of one of its exclusiveness-pattern
    values, partitions placed on brokers by capacity and distance to the source roots.
    Patterns are learned from the profiles placed so far; ``schema`` (the messages'
    schema) tells which patterns occur at most once per message."""
    hosts = PepHosts.from_graph(overlay.graph, overlay.roots, partitions_per_broker=partitions_per_broker,
                                occurrence=SchemaOccurrence.from_schema(schema) if schema else None,
                                namespaces=schema.namespaces if schema else None)

    def place(sub: Subscription) -> str:
        return hosts.place(sub.profile_id, sub.text)

    return place


PLACEMENTS = ("nearest", "random", "pep")


def by_name(name: str, overlay: Overlay, seed: int = 0, schema: Schema | None = None) -> Placement:
    """The placement called ``name`` (one of :data:`PLACEMENTS`) for ``overlay``."""
    if name == "nearest":
        return nearest
    if name == "random":
        return random_placement(overlay.brokers, seed)
    if name == "pep":
        return pep_placement(overlay, schema)
    raise ValueError(f"unknown placement {name!r}; choose from {', '.join(PLACEMENTS)}")
