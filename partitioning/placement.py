"""Placing partitions on brokers, and the profile moves a new placement implies.

Each partition goes to one broker. Brokers are weighed by ``capacity`` (share of
the profiles they should host) and ``cost`` (distance to the sources of the
interests they will serve, e.g. the mean shortest-path distance to the sources'
root brokers: a message travels less to reach a near broker). Partitions are placed
largest first (LPT) on the broker with the lowest score ``fill / share +
distance_weight * cost / max cost`` among those that stay within ``(1 + tolerance)``
of their share (all of them when none does). With ``current`` (where each
partition's profiles are now) a partition stays on the broker that already hosts
most of its profiles when that broker has room, so a rebalance moves few profiles.

Don't-care profiles go, one by one, to the broker hosting the fewest profiles
relative to its capacity. A new placement is applied as :class:`Move` deltas
``(profile_id, from_broker, to_broker)``: the query plane adds the profile at the
new host and removes it from the old one.

>>> sites = [BrokerSite("b1", capacity=2.0), BrokerSite("b2"), BrokerSite("b3", cost=5.0)]
>>> place_partitions([10, 10, 10, 10], sites)
['b1', 'b1', 'b2', 'b3']
>>> moves({"p1": "b1", "p2": "b2"}, {"p1": "b1", "p2": "b3"})
[Move(profile_id='p2', from_broker='b2', to_broker='b3')]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from partitioning.errors import PartitioningError
from partitioning.pep import DONT_CARE, Partitioning


@dataclass(frozen=True)
class BrokerSite:
    """A broker as placement sees it."""

    id: str
    capacity: float = 1.0
    cost: float = 0.0


class Move(NamedTuple):
    """One profile changing host: a delta for the query plane."""

    profile_id: str
    from_broker: str
    to_broker: str


def _check(sites: Sequence[BrokerSite]) -> None:
    if not sites:
        raise PartitioningError("no brokers to place partitions on")
    for s in sites:
        if not s.capacity > 0:
            raise PartitioningError(f"broker {s.id!r} has capacity {s.capacity!r}; capacities must be positive")
        if s.cost < 0:
            raise PartitioningError(f"broker {s.id!r} has negative distance cost {s.cost!r}")


def place_partitions(loads: Sequence[int], sites: Sequence[BrokerSite], *, tolerance: float = 0.1,
                     distance_weight: float = 0.5, current: Sequence[Mapping[str, int]] | None = None) -> list[str]:
    """The broker of each partition (see the module docstring)."""
    _check(sites)
    weights = [max(n, 0) for n in loads] if sum(loads) > 0 else [1] * len(loads)
    total, cap_sum = sum(weights), sum(s.capacity for s in sites)
    share = {s.id: total * s.capacity / cap_sum for s in sites}
    top_cost = max(s.cost for s in sites) or 1.0
    fill = dict.fromkeys(share, 0.0)
    out = [""] * len(loads)
    for p in sorted(range(len(loads)), key=lambda p: (-weights[p], p)):
        w = weights[p]
        room = [s for s in sites if fill[s.id] + w <= share[s.id] * (1 + tolerance)] or list(sites)
        here = current[p] if current is not None else {}
        stay = max(room, key=lambda s: here.get(s.id, 0))
        if here.get(stay.id, 0) > 0:
            best = stay
        else:
            best = min(room, key=lambda s: ((fill[s.id] + w) / share[s.id] + distance_weight * s.cost / top_cost, s.id))
        fill[best.id] += w
        out[p] = best.id
    return out


def assign_hosts(partitioning: Partitioning, partition_brokers: Sequence[str],
                 sites: Sequence[BrokerSite]) -> dict[str, str]:
    """Host broker of every profile: its partition's broker; don't-care profiles
    spread to the least-loaded broker relative to capacity."""
    _check(sites)
    counts = Counter({s.id: 0 for s in sites})
    for part, n in enumerate(partitioning.loads):
        counts[partition_brokers[part]] += n
    hosts = {}
    for pid, part in partitioning.assignment.items():
        if part == DONT_CARE:
            broker = least_loaded(counts, sites)
            counts[broker] += 1
        else:
            broker = partition_brokers[part]
        hosts[pid] = broker
    return hosts


def least_loaded(counts: Mapping[str, int], sites: Sequence[BrokerSite]) -> str:
    """The broker hosting the fewest profiles relative to its capacity (ties by id)."""
    return min(sites, key=lambda s: (counts.get(s.id, 0) / s.capacity, s.id)).id


def moves(old_hosts: Mapping[str, str], new_hosts: Mapping[str, str]) -> list[Move]:
    """The moves that turn ``old_hosts`` into ``new_hosts`` (profiles in both), by profile id."""
    return [Move(pid, old_hosts[pid], host) for pid, host in sorted(new_hosts.items())
            if pid in old_hosts and old_hosts[pid] != host]
