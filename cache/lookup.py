"""cache-lookup (thesis section 5.2, Fig. 15): which regions answer which part of a
query, and the remainder (section 5.3) the source must still answer.

For each conjunction ``Conj`` of the query (made pairwise disjoint first): ``CC = {Conj}``;
for each region ``C`` of the concept and each ``Conj'`` in ``CC``, match-type(Conj', C):

| outcome     | from the cache          | what stays in CC   |
|-------------|-------------------------|--------------------|
| exact       | all of C's items        | nothing            |
| containing  | Conj' applied to C's    | nothing            |
| contained   | all of C's items        | Conj' AND NOT C    |
| overlapping | Conj' applied to C's    | Conj' AND NOT C    |
| disjoint    | nothing                 | Conj'              |

stopping early when ``CC`` is empty (a region disjoint from ``Conj`` is disjoint from all
of ``CC``: one test, counted as one call). What is left over every conjunction is the
remainder, a list of conjunctions disjoint from each other and from every region: each
becomes one new region. Regions are disjoint, so what is found does not depend on their order.

Two bounds, not in the thesis, keep a lookup cheap when many regions overlap. A region
that would split a conjunction's remainder into more than :data:`cache.defaults.MAX_PARTS`
parts gives way (:attr:`Plan.evict`): the remainder is not split by it and so fetches its
items again (section 4.3 allows sending more than the complement when it grows too
complex; this sends only what that region held). And a lookup makes at most
:data:`cache.defaults.MAX_MATCH_CALLS` match-type calls; past them it stops, and what is
left (:attr:`Plan.unkept`) is fetched but kept in no region, since it may overlap regions
not looked at. Either way the regions stay disjoint and the answer exact.

>>> from cache.condition import Condition
>>> from cache.regions import Region
>>> [c] = Condition.parse("@K = 'van Gogh' and @M = 'Menschen'").dnf
>>> plan = cache_lookup(list(Condition.parse("(@K = 'van Gogh' or @K = 'Monet') and @D = 'um 1600'").dnf),
...                     [Region("/Malerei", c, "", None, {}, {}, 0.0, 0)])
>>> [m for _, m in plan.used], plan.calls
(['overlapping'], 2)
>>> from cache.conjunct import text
>>> [text(p) for p in plan.remainder]
["@K = 'van Gogh' and @D = 'um 1600' and not(@M = 'Menschen')", "@K = 'Monet' and @D = 'um 1600'"]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cache import defaults
from cache.conjunct import Conjunct, meet
from cache.match import DISJOINT, relate
from cache.regions import Region


@dataclass
class Plan:
    """What a lookup decided: regions used with their match type (one entry per use),
    the remainder (new regions), what is fetched but not kept (``unkept``: the lookup was
    cut short), the regions that give way (``fallbacks`` of them), and match-type calls
    and outcomes."""

    used: list[tuple[Region, str]] = field(default_factory=list)
    remainder: list[Conjunct] = field(default_factory=list)
    unkept: list[Conjunct] = field(default_factory=list)
    evict: list[Region] = field(default_factory=list)
    calls: int = 0
    counts: Counter = field(default_factory=Counter)
    fallbacks: int = 0

    def _match(self, q: Conjunct, region: Region) -> tuple[str, list[Conjunct]]:
        self.calls += 1
        outcome, rest = relate(q, region.conjunct)
        self.counts[outcome] += 1
        return outcome, rest


def cache_lookup(conjuncts: Sequence[Conjunct], regions: Sequence[Region], max_parts: int | None = None,
                 max_calls: int | None = None) -> Plan:
    """Fig. 15 over ``regions`` for a query whose disjoint conjunctions are ``conjuncts``
    (limits: default :data:`cache.defaults.MAX_PARTS` and :data:`cache.defaults.MAX_MATCH_CALLS`)."""
    max_parts = defaults.MAX_PARTS if max_parts is None else max_parts
    max_calls = defaults.MAX_MATCH_CALLS if max_calls is None else max_calls
    plan = Plan()
    for conj in conjuncts:
        cc = [conj]
        complete = True
        for region in regions:
            if plan.calls >= max_calls:
                complete = False
                break
            if region in plan.evict:
                continue
            if len(cc) > 1 and not meet(conj, region.conjunct):
                plan.calls += 1             # disjoint from the whole conjunction, so from each of its parts
                plan.counts[DISJOINT] += 1
                continue
            stay: list[Conjunct] = []
            used: list[tuple[Region, str]] = []
            for part in cc:
                outcome, rest = plan._match(part, region)
                if outcome != DISJOINT:
                    used.append((region, outcome))
                stay += rest
            if len(stay) > max_parts:
                plan.evict.append(region)
                plan.fallbacks += 1
                continue
            plan.used += used
            cc = stay
            if not cc:
                break
        (plan.remainder if complete else plan.unkept).extend(cc)
    return plan
