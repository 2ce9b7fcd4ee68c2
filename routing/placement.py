"""Where a profile is hosted: placement hooks for the simulator (and, later, PEP).

A :data:`Placement` is any function from a :class:`Subscription` (profile id, text,
and the broker nearest to the subscriber) to the id of the host broker. Two ship
here; a partitioning strategy (``partitioning``, issue 5) plugs in the same way.

>>> s = Subscription("p1", "/nitf", home="b7")
>>> nearest(s), random_placement(["b1", "b2"], seed=3)(s) in ("b1", "b2")
('b7', True)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Sequence


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


PLACEMENTS = ("nearest", "random")
