"""PEP: Partitioning based on Exclusiveness Patterns (ONYX, VLDB 2004, s. 4.4).

K partitions from the M patterns :func:`~partitioning.discovery.discover` chooses:
each pattern's value range is split into K buckets (:class:`~partitioning.buckets.Buckets`)
and bucket ``i`` of every pattern is partition ``i``. A message in which every
pattern occurs once carries one value per pattern, so it can only match profiles in
at most M partitions, whatever the population.

A profile goes to the bucket of one of its chosen patterns: among the patterns of
its best occurrence tier, the bucket whose partition is *least loaded* (ties to the
first). Profiles with a single candidate are placed first, so the flexible ones fill
around them. Profiles without a chosen pattern go to the don't-care partition
(:data:`DONT_CARE`), reported and placed on brokers by load alone.

Balance: no partition holds more than ``max((1 + tolerance) * mean, mean + 1 / tolerance)``
profiles, rounded up, where ``mean`` is the patterned profiles over K (the additive
slack keeps small populations from spilling over single profiles). A profile whose
candidates are all full *spills* to the least-loaded partition; spills are counted,
and they cost exclusiveness only for those profiles.

:class:`PepPartitioner` is also incremental: :meth:`~PepPartitioner.add` places a new
profile with the current patterns, rediscovering patterns (without moving anyone)
each time the population has grown by ``growth``; :meth:`~PepPartitioner.rebalance`
repartitions everything when the population has drifted and returns the profiles
that change partition, partitions relabelled to keep as many profiles in place as
possible.

>>> from partitioning.predicates import equalities
>>> pop = {f"p{i}": equalities(f"/m[a/@v = {i % 8}][b/@v = {i % 5}]") for i in range(400)}
>>> part = PepPartitioner.fit(pop, 4).partitioning()
>>> part.loads, part.dont_care
([100, 100, 100, 100], 0)
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from partitioning.buckets import Buckets
from partitioning.discovery import Discovery, discover
from partitioning.errors import PartitioningError
from partitioning.occurrence import Occurrence
from partitioning.predicates import Equality, Pattern

DONT_CARE = -1
"""The partition of profiles that involve no chosen pattern."""


@dataclass
class Partitioning:
    """Where every profile is: partition index per profile id (:data:`DONT_CARE`
    for the don't-care partition), the partitions' loads and the run's figures."""

    k: int
    assignment: dict[str, int]
    loads: list[int]
    patterns: list[Pattern]
    spilled: int
    tolerance: float

    @property
    def dont_care(self) -> int:
        return sum(1 for p in self.assignment.values() if p == DONT_CARE)

    @property
    def cap(self) -> int:
        return capacity(sum(self.loads), self.k, self.tolerance)

    def imbalance(self) -> float:
        """Largest partition over the mean (1.0 is perfect balance)."""
        mean = sum(self.loads) / self.k
        return max(self.loads) / mean if mean else 1.0

    def summary(self) -> dict:
        return {"partitions": self.k, "profiles": len(self.assignment), "dont_care": self.dont_care,
                "spilled": self.spilled, "tolerance": self.tolerance, "cap": self.cap,
                "max_load": max(self.loads), "min_load": min(self.loads),
                "imbalance": round(self.imbalance(), 4), "patterns": [str(p) for p in self.patterns]}


def capacity(profiles: int, k: int, tolerance: float) -> int:
    """Most profiles a partition may hold (see the module docstring)."""
    mean = profiles / k
    slack = 1 / tolerance if tolerance > 0 else 0.0
    return math.ceil(max((1 + tolerance) * mean, mean + slack))


class PepPartitioner:
    """The state of a PEP partitioning: population, chosen patterns, their buckets
    and where each profile is."""

    def __init__(self, partitions: int, *, occurrence: Occurrence | None = None, tolerance: float = 0.1,
                 min_values: int = 2, growth: float = 0.25) -> None:
        if partitions < 1:
            raise PartitioningError(f"need at least 1 partition, got {partitions}")
        if not tolerance > 0:
            raise PartitioningError(f"the balance tolerance must be positive (e.g. 0.1 for 10%), got {tolerance}")
        if not growth > 0:
            raise PartitioningError(f"growth must be positive, got {growth}")
        self.k, self.occurrence, self.tolerance = partitions, occurrence, tolerance
        self.min_values, self.growth = min_values, growth
        self.profiles: dict[str, Sequence[Equality]] = {}
        self.assignment: dict[str, int] = {}
        self.loads = [0] * partitions
        self.patterned = 0
        self.spilled = 0
        self.discovery: Discovery | None = None
        self.buckets: dict[Pattern, Buckets] = {}
        self.tiers: dict[Pattern, int] = {}
        self.label = list(range(partitions))  # bucket -> partition (identity until a rebalance)
        self._discovered_at = 0

    # -- batch ----------------------------------------------------------------------
    @classmethod
    def fit(cls, population: Mapping[str, Sequence[Equality]], partitions: int, **options) -> "PepPartitioner":
        """Discover patterns over ``population`` and partition all of it."""
        self = cls(partitions, **options)
        self.profiles = dict(population)
        self._repartition()
        return self

    def _repartition(self) -> None:
        self._discover(keep=False)
        self.assignment, self.loads, self.patterned, self.spilled = {}, [0] * self.k, 0, 0
        singles, multi = [], []
        for pid, eqs in self.profiles.items():
            cands = self._candidates(eqs)
            if not cands:
                self.assignment[pid] = DONT_CARE
            else:
                (singles if len(cands) == 1 else multi).append((pid, cands))
        self.patterned = len(singles) + len(multi)
        cap = capacity(self.patterned, self.k, self.tolerance)
        loads = self.loads
        for pid, cands in singles + multi:
            best = cands[0]
            for c in cands:
                if loads[c] < loads[best]:
                    best = c
            self._put(pid, best, cap)

    def _discover(self, keep: bool) -> None:
        """Choose patterns over the current population. ``keep`` keeps the buckets
        of patterns that stay chosen (incremental use: nobody moves); otherwise all
        buckets are refitted."""
        self.discovery = discover(self.profiles, self.occurrence, self.min_values)
        chosen = self.discovery.chosen
        old = self.buckets if keep else {}
        self.buckets = {s.pattern: old.get(s.pattern) or Buckets(self.k, s.values) for s in chosen}
        self.tiers = {s.pattern: s.tier for s in chosen}
        self._discovered_at = len(self.profiles)
        fresh = {s.pattern for s in chosen if s.pattern not in old and not self.buckets[s.pattern].dense}
        if fresh:
            self._spread(fresh, list(self.loads) if keep else [0.0] * self.k)

    def _spread(self, sparse: set[Pattern], expected: list[float]) -> None:
        """Give the single-value buckets of sparse patterns to partitions, largest
        expected load first onto the least-loaded partition (LPT). A profile's
        expected contribution is split evenly over its candidate buckets."""
        groups: Counter = Counter()
        for eqs in self.profiles.values():
            best, cands = 3, []
            for pattern, value in eqs:
                t = self.tiers.get(pattern)
                if t is None or t > best:
                    continue
                if t < best:
                    best, cands = t, []
                cands.append((pattern, self.buckets[pattern](value)))
            for pattern, b in cands:
                share = 1 / len(cands)
                if pattern in sparse:
                    groups[pattern, b] += share
                else:
                    expected[self.label[b]] += share
        mapping: dict[Pattern, dict[int, int]] = {p: {} for p in sparse}
        for (pattern, b), w in sorted(groups.items(), key=lambda g: (-g[1], str(g[0][0]), g[0][1])):
            target = min(range(self.k), key=expected.__getitem__)
            mapping[pattern][b] = target
            expected[target] += w
        for pattern, m in mapping.items():
            self.buckets[pattern].relabel({b: self.label.index(t) for b, t in m.items()})

    def _candidates(self, eqs: Sequence[Equality]) -> list[int]:
        best, out = 3, []
        for pattern, value in eqs:
            b = self.buckets.get(pattern)
            if b is None:
                continue
            t = self.tiers[pattern]
            part = self.label[b(value)]
            if t < best:
                best, out = t, [part]
            elif t == best and part not in out:
                out.append(part)
        return out

    def _put(self, pid: str, part: int, cap: int) -> int:
        if self.loads[part] >= cap:
            part = min(range(self.k), key=self.loads.__getitem__)
            self.spilled += 1
        self.loads[part] += 1
        self.assignment[pid] = part
        return part

    # -- incremental ----------------------------------------------------------------
    def add(self, pid: str, eqs: Sequence[Equality]) -> int:
        """Place a new (or changed) profile; returns its partition or :data:`DONT_CARE`."""
        if pid in self.assignment:
            self.remove(pid)
        self.profiles[pid] = tuple(eqs)
        if len(self.profiles) >= max(self._discovered_at * (1 + self.growth), self._discovered_at + 1):
            self._discover(keep=True)
        cands = self._candidates(eqs)
        if not cands:
            self.assignment[pid] = DONT_CARE
            return DONT_CARE
        self.patterned += 1
        best = min(cands, key=self.loads.__getitem__)
        return self._put(pid, best, capacity(self.patterned, self.k, self.tolerance))

    def remove(self, pid: str) -> None:
        """Forget a profile (unknown ids are ignored: deleting twice is harmless)."""
        part = self.assignment.pop(pid, None)
        self.profiles.pop(pid, None)
        if part is not None and part != DONT_CARE:
            self.loads[part] -= 1
            self.patterned -= 1

    def rebalance(self) -> dict[str, tuple[int, int]]:
        """Repartition the whole population with freshly discovered patterns and
        buckets; returns ``{profile: (old partition, new partition)}`` for the
        profiles that change partition."""
        old = dict(self.assignment)
        self.label = list(range(self.k))
        self._repartition()
        perm = _align(old, self.assignment, self.k)
        self.label = [perm[b] for b in range(self.k)]
        loads = [0] * self.k
        for b, n in enumerate(self.loads):
            loads[perm[b]] = n
        self.loads = loads
        moved = {}
        for pid, new in self.assignment.items():
            new = perm[new] if new != DONT_CARE else DONT_CARE
            self.assignment[pid] = new
            if old.get(pid) != new:
                moved[pid] = (old.get(pid, DONT_CARE), new)
        return moved

    def partitioning(self) -> Partitioning:
        return Partitioning(self.k, self.assignment, self.loads, list(self.buckets), self.spilled, self.tolerance)


def _align(old: Mapping[str, int], new: Mapping[str, int], k: int) -> list[int]:
    """A relabelling of new partitions (index) to old labels (value) that keeps the
    most profiles where they were: greedy on the largest overlaps."""
    overlap = Counter((n, old[pid]) for pid, n in new.items()
                      if n != DONT_CARE and old.get(pid, DONT_CARE) != DONT_CARE)
    perm: dict[int, int] = {}
    taken: set[int] = set()
    for (n, o), _ in overlap.most_common():
        if n not in perm and o not in taken:
            perm[n] = o
            taken.add(o)
    free = iter(o for o in range(k) if o not in taken)
    return [perm[n] if n in perm else next(free) for n in range(k)]


def random_partitioning(profile_ids: Sequence[str], partitions: int, seed: int = 0) -> Partitioning:
    """The baseline: profiles shuffled and dealt round robin, so partitions are
    random and as balanced as they can be.

    >>> random_partitioning([f"p{i}" for i in range(10)], 3).loads
    [4, 3, 3]
    """
    if partitions < 1:
        raise PartitioningError(f"need at least 1 partition, got {partitions}")
    order = list(profile_ids)
    random.Random(seed).shuffle(order)
    assignment = {pid: i % partitions for i, pid in enumerate(order)}
    loads = [len(order) // partitions + (1 if i < len(order) % partitions else 0) for i in range(partitions)]
    return Partitioning(partitions, assignment, loads, [], 0, 0.0)
