"""Profile placement: Partitioning based on Exclusiveness Patterns (PEP), the random
baseline it is measured against, and the mapping of partitions onto brokers that the
registration service uses to choose a profile's host broker.

Modules, each with one job: :mod:`~partitioning.predicates` (a profile's required
equalities and their patterns), :mod:`~partitioning.occurrence` (at most once per
message? from a DTD, a schema or sample messages), :mod:`~partitioning.discovery`
(choosing patterns), :mod:`~partitioning.buckets` (value ranges to buckets),
:mod:`~partitioning.pep` (partitions, incremental placement, rebalance, the random
baseline), :mod:`~partitioning.placement` (partitions to brokers, moves) and
:mod:`~partitioning.hosts` (one profile at a time, for the service and the simulator).
Depends on :mod:`yfilter` (its parser) only, never on routing or broker.
"""

from partitioning.errors import PartitioningError
from partitioning.hosts import PepHosts
from partitioning.pep import DONT_CARE, Partitioning, PepPartitioner, random_partitioning
from partitioning.placement import BrokerSite, Move, place_partitions
from partitioning.predicates import Equality, Pattern, equalities

__all__ = ["DONT_CARE", "BrokerSite", "Equality", "Move", "Partitioning", "PartitioningError", "Pattern",
           "PepHosts", "PepPartitioner", "equalities", "place_partitions", "random_partitioning"]
