"""Pattern discovery: aggregate the population's required equalities into
exclusiveness patterns and choose a set greedily so every profile involves one.

Candidates are the patterns compared to at least ``min_values`` different values
(one value separates nothing). They are chosen greedily: among the patterns of the
best occurrence tier (at most once before unknown before repeating, see
:mod:`partitioning.occurrence`), the one involving the most profiles not yet
covered, until no candidate covers another profile. Profiles that involve no chosen
pattern form the *don't care* partition, reported in :attr:`Discovery.dont_care`.

>>> from partitioning.predicates import equalities
>>> pop = {"a": equalities("/m[x/@v = 1]"), "b": equalities("/m[x/@v = 2][y/@v = 1]"),
...        "c": equalities("/m[y/@v = 3]"), "d": equalities("/m/z")}
>>> d = discover(pop)
>>> [str(s.pattern) for s in d.chosen], d.dont_care
(['/m/x/@v', '/m/y/@v'], ['d'])
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from partitioning.occurrence import Occurrence, tier
from partitioning.predicates import Equality, Pattern, Value


@dataclass(frozen=True)
class PatternStats:
    """One pattern across the population: profiles involving it (coverage), how many
    of them each value has, and its occurrence tier."""

    pattern: Pattern
    coverage: int
    values: Counter = field(repr=False, compare=False)
    tier: int = 1

    @property
    def distinct(self) -> int:
        return len(self.values)


@dataclass
class Discovery:
    """Chosen patterns (in the order chosen), every candidate by coverage, the
    don't-care profiles and the population size."""

    chosen: list[PatternStats]
    candidates: list[PatternStats]
    dont_care: list[str]
    profiles: int

    def summary(self) -> dict:
        return {"profiles": self.profiles, "candidates": len(self.candidates),
                "chosen": [{"pattern": str(s.pattern), "coverage": s.coverage, "values": s.distinct,
                            "tier": s.tier} for s in self.chosen],
                "dont_care": len(self.dont_care)}


def discover(population: Mapping[str, Sequence[Equality]], occurrence: Occurrence | None = None,
             min_values: int = 2, max_patterns: int | None = None) -> Discovery:
    """Discover and choose exclusiveness patterns over ``population`` (profile id ->
    its required equalities, as :func:`partitioning.predicates.equalities` gives)."""
    ids = list(population)
    members: dict[Pattern, list[int]] = {}
    values: dict[Pattern, Counter] = {}
    for i, pid in enumerate(ids):
        seen: set[Pattern] = set()
        for pattern, value in population[pid]:
            values.setdefault(pattern, Counter())[value] += 1
            if pattern not in seen:
                seen.add(pattern)
                members.setdefault(pattern, []).append(i)
    stats = [PatternStats(p, len(members[p]), values[p], tier(occurrence, p)) for p in members]
    stats.sort(key=lambda s: (-s.coverage, str(s.pattern)))
    candidates = [s for s in stats if s.distinct >= min_values]

    covered = bytearray(len(ids))
    # Lazy greedy set cover: a stored gain only shrinks, so a popped entry whose
    # recomputed gain is unchanged is the best one.
    heap = [(s.tier, -s.coverage, n) for n, s in enumerate(candidates)]
    heapq.heapify(heap)
    chosen: list[PatternStats] = []
    while heap and (max_patterns is None or len(chosen) < max_patterns):
        t, neg_gain, n = heapq.heappop(heap)
        s = candidates[n]
        gain = sum(1 for i in members[s.pattern] if not covered[i])
        if gain == 0:
            continue
        if gain < -neg_gain:
            heapq.heappush(heap, (t, -gain, n))
            continue
        chosen.append(s)
        for i in members[s.pattern]:
            covered[i] = 1
    dont_care = [pid for i, pid in enumerate(ids) if not covered[i]]
    return Discovery(chosen, candidates, dont_care, len(ids))
