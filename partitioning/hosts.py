"""Choosing host brokers by PEP, one profile at a time: what the ``pep`` placement
strategy (:mod:`routing.placement`, for the registration service and the routing
simulator) calls.

A :class:`PepHosts` keeps an incremental :class:`~partitioning.pep.PepPartitioner`
with ``partitions_per_broker`` partitions per broker, placed on the brokers by
capacity and distance (:func:`~partitioning.placement.place_partitions`, equal
expected loads). :meth:`~PepHosts.place` reads the profile's required equalities,
puts it in a partition and returns that partition's broker; don't-care profiles
(and every profile before two values of a pattern have been seen) go to the least
loaded broker. :meth:`~PepHosts.rebalance` repartitions, re-places partitions by
their real loads where their profiles already are, and returns the moves.

>>> hosts = PepHosts(["b1", "b2"], partitions_per_broker=1)
>>> [hosts.place(f"p{i}", f"/m[a/@v = {i % 2}]") for i in range(6)]
['b1', 'b2', 'b1', 'b2', 'b1', 'b2']
>>> hosts.place("q", "/m[a/@v = 0][b/@v = 9]") == hosts.host("p2")
True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from partitioning.errors import PartitioningError
from partitioning.occurrence import Occurrence
from partitioning.pep import DONT_CARE, PepPartitioner
from partitioning.placement import BrokerSite, Move, least_loaded, moves, place_partitions
from partitioning.predicates import Equality, equalities


class PepHosts:
    """Incremental PEP placement of profiles on a fixed set of brokers."""

    def __init__(self, brokers: Sequence[str | BrokerSite], *, partitions_per_broker: int = 4,
                 tolerance: float = 0.1, distance_weight: float = 0.5, occurrence: Occurrence | None = None,
                 namespaces: Mapping[str, str] | None = None, growth: float = 0.25) -> None:
        if partitions_per_broker < 1:
            raise PartitioningError(f"partitions_per_broker must be at least 1, got {partitions_per_broker}")
        self.sites = [BrokerSite(b) if isinstance(b, str) else b for b in brokers]
        self.tolerance, self.distance_weight = tolerance, distance_weight
        self.namespaces = dict(namespaces or {})
        k = len(self.sites) * partitions_per_broker
        self.partitioner = PepPartitioner(k, occurrence=occurrence, tolerance=tolerance, growth=growth)
        self.partition_broker = place_partitions([1] * k, self.sites, tolerance=tolerance,
                                                 distance_weight=distance_weight)
        self.hosts: dict[str, str] = {}
        self.counts: Counter[str] = Counter()

    @classmethod
    def from_graph(cls, graph: nx.Graph, roots: Iterable[str] = (), **options) -> "PepHosts":
        """Brokers of an overlay graph: ``capacity`` from each node's attributes
        (default 1), cost = mean weighted distance to the source roots given."""
        roots = sorted(set(roots))
        dist = [nx.single_source_dijkstra_path_length(graph, r, weight="weight") for r in roots]
        sites = [BrokerSite(b, float(graph.nodes[b].get("capacity", 1.0)),
                            sum(d[b] for d in dist) / len(dist) if dist else 0.0) for b in sorted(graph.nodes)]
        return cls(sites, **options)

    @property
    def brokers(self) -> list[str]:
        return [s.id for s in self.sites]

    def host(self, profile_id: str) -> str:
        return self.hosts[profile_id]

    def place(self, profile_id: str, text: str) -> str:
        """Host broker of a new or changed profile (raises :class:`yfilter.ProfileError`
        for a profile the engine rejects)."""
        return self.place_equalities(profile_id, equalities(text, self.namespaces))

    def place_equalities(self, profile_id: str, eqs: Sequence[Equality]) -> str:
        """:meth:`place` for a profile whose equalities are already known."""
        self._forget(profile_id)
        part = self.partitioner.add(profile_id, eqs)
        host = least_loaded(self.counts, self.sites) if part == DONT_CARE else self.partition_broker[part]
        self.hosts[profile_id] = host
        self.counts[host] += 1
        return host

    def restore(self, placed: Iterable[tuple[str, str, str]]) -> None:
        """Learn an existing population of ``(profile id, text, host)`` without moving
        anyone: profiles are partitioned again, and each partition is mapped to the
        broker that hosts most of its profiles, so that new profiles join them
        (:meth:`rebalance` may move the rest later)."""
        placed = list(placed)
        for pid, text, _ in placed:
            self._forget(pid)
            self.partitioner.add(pid, equalities(text, self.namespaces))
        votes: dict[int, Counter[str]] = {}
        for pid, _, host in placed:
            part = self.partitioner.assignment[pid]
            if part != DONT_CARE:
                votes.setdefault(part, Counter())[host] += 1
        for part, hosts in votes.items():
            self.partition_broker[part] = hosts.most_common(1)[0][0]
        for pid, _, host in placed:
            self.hosts[pid] = host
            self.counts[host] += 1

    def remove(self, profile_id: str) -> None:
        self._forget(profile_id)
        self.partitioner.remove(profile_id)

    def _forget(self, profile_id: str) -> None:
        old = self.hosts.pop(profile_id, None)
        if old is not None:
            self.counts[old] -= 1

    def rebalance(self) -> list[Move]:
        """Repartition the population and re-place the partitions; returns the moves
        (already applied here) for the query plane."""
        before = dict(self.hosts)
        self.partitioner.rebalance()
        parts = self.partitioner.assignment
        current = [Counter() for _ in range(self.partitioner.k)]
        for pid, part in parts.items():
            if part != DONT_CARE:
                current[part][before[pid]] += 1
        self.partition_broker = place_partitions(self.partitioner.loads, self.sites, tolerance=self.tolerance,
                                                 distance_weight=self.distance_weight, current=current)
        self.hosts = {pid: before[pid] if part == DONT_CARE else self.partition_broker[part]
                      for pid, part in parts.items()}
        self.counts = Counter(self.hosts.values())
        return moves(before, self.hosts)
