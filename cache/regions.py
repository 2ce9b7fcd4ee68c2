"""Semantic regions and where they live: one partition per concept (thesis section 4.2),
regions pairwise disjoint and never split or merged (section 4.3, Table 2, option 3),
replaced whole by LRU on their last access T_L with ties broken by their collection time
T_K (FIFO, section 4.5), within a capacity in bytes, and dropped when older or idler than
the coherence limits (TTL, section 4.5).

>>> store = RegionStore(capacity_bytes=700, max_age=None, max_idle=None)
>>> for i in range(3):
...     store.add(Region("/p", (), f"@n = {i}", None, {f"id{i}": b"<p/>" * 20}, {}, created=float(i), seq=i))
>>> store.evict(), [r.condition for r in store.of("/p")]
(1, ['@n = 1', '@n = 2'])
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from cache import defaults
from cache.conjunct import Conjunct
from cache.window import Window


@dataclass(eq=False)
class Region:
    """One cache entry: the conjunction that describes it (time literals included), its
    XPath text and window, and its items (id -> XML, id -> time when timed)."""

    concept: str
    conjunct: Conjunct
    condition: str
    window: Window | None
    items: dict[str, bytes]
    times: dict[str, float]
    created: float
    seq: int
    last_access: float = field(default=-math.inf)
    size: int = 0

    def __post_init__(self) -> None:
        self.last_access = max(self.last_access, self.created)
        self.size = (defaults.REGION_OVERHEAD_BYTES + len(self.condition)
                     + sum(len(k) + len(v) for k, v in self.items.items()))


class _RegionFields(NamedTuple):
    concept: str
    condition: str
    items: int
    bytes: int
    created: float
    last_access: float


class RegionInfo(_RegionFields):
    """What :meth:`cache.SemanticCache.regions` reports: the tuple ``(concept, condition,
    item count, bytes, created, last access)``, plus, as attributes outside the tuple,
    :attr:`window` (``None`` for a cache without times) and :attr:`item_ids`."""

    window: Window | None = None
    item_ids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, region: Region) -> "RegionInfo":
        info = cls(region.concept, region.condition, len(region.items), region.size, region.created,
                   region.last_access)
        info.window, info.item_ids = region.window, frozenset(region.items)
        return info


class RegionStore:
    """The regions of every concept, with their replacement and coherence."""

    def __init__(self, capacity_bytes: int, max_age: float | None, max_idle: float | None) -> None:
        self.capacity_bytes, self.max_age, self.max_idle = capacity_bytes, max_age, max_idle
        self._by_concept: dict[str, list[Region]] = {}
        self.bytes = 0

    def of(self, concept: str) -> list[Region]:
        return self._by_concept.get(concept, [])

    def __iter__(self) -> Iterator[Region]:
        for regions in self._by_concept.values():
            yield from regions

    def __len__(self) -> int:
        return sum(len(r) for r in self._by_concept.values())

    def add(self, region: Region) -> None:
        self._by_concept.setdefault(region.concept, []).append(region)
        self.bytes += region.size

    def remove(self, region: Region) -> None:
        regions = self._by_concept[region.concept]
        regions.remove(region)
        if not regions:
            del self._by_concept[region.concept]
        self.bytes -= region.size

    def expire(self, now: float) -> int:
        """Drop the regions past the age or idle limit; how many."""
        stale = [r for r in self if (self.max_age is not None and now - r.created > self.max_age)
                 or (self.max_idle is not None and now - r.last_access > self.max_idle)]
        for r in stale:
            self.remove(r)
        return len(stale)

    def evict(self) -> int:
        """Drop least recently used regions (ties: first collected) until the rest fit
        the capacity; how many."""
        if self.bytes <= self.capacity_bytes:
            return 0
        dropped = 0
        for r in sorted(self, key=lambda r: (r.last_access, r.created, r.seq)):
            if self.bytes <= self.capacity_bytes:
                break
            self.remove(r)
            dropped += 1
        return dropped

    def clear(self, concept: str | None = None) -> int:
        """Drop every region (of ``concept``); how many."""
        doomed = list(self) if concept is None else list(self.of(concept))
        for r in doomed:
            self.remove(r)
        return len(doomed)
