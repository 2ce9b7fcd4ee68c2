"""The semantic cache (thesis ``002``, section 2.3's query processing): answer a query from
the regions earlier queries fetched, send only the remainder to the source, and keep
what the source returned as new regions.

A *source* answers ``source(concept, condition)`` with ``(item_id, xml_bytes)`` pairs: the
items whose ``concept`` elements satisfy the XPath predicate ``condition`` (a test's list,
the archive, the log). A cache made with ``timed=True`` asks
``source(concept, condition, window)`` (a :class:`cache.window.Window`) instead and wants
``(item_id, xml_bytes, time)`` triples; its queries each name a window, and a region is
complete for its window.

>>> paintings = {"p1": b"<painting year='1750' artist='van Gogh'/>", "p2": b"<painting year='1850' artist='Monet'/>",
...              "p3": b"<painting year='1950'/>"}
>>> from lxml import etree
>>> def source(concept, condition):
...     return [(k, v) for k, v in paintings.items() if etree.fromstring(v).xpath(f"boolean({concept}[{condition}])")]
>>> cache = SemanticCache(source, capacity_bytes=1 << 20)
>>> r = cache.query("/painting", "@year >= 1700 and @year <= 1900")
>>> sorted(r.items), r.from_cache, r.from_source, r.remainder
(['p1', 'p2'], 0, 2, '@year >= 1700 and @year <= 1900')
>>> r = cache.query("/painting", "@year <= 1800 and @year >= 1700")
>>> sorted(r.items), r.from_cache, r.from_source, r.remainder, r.match_types
(['p1'], 1, 0, None, ['containing'])
>>> [(i.condition, i.items) for i in cache.regions()]
[('@year >= 1700 and @year <= 1900', 2)]
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from cache import defaults
from cache.concept import concept_path
from cache.condition import Condition, as_condition
from cache.conjunct import Conjunct, satisfiable, simplify, text, time_range
from cache.errors import SourceError, WindowError
from cache.evaluate import Probe, parse_item
from cache.lookup import Plan, cache_lookup
from cache.match import CONTAINED, EXACT
from cache.regions import Region, RegionInfo, RegionStore
from cache.window import Window

Source = Callable[..., Iterable[tuple]]
"""``source(concept, condition[, window])`` -> ``(item_id, xml_bytes[, time])`` rows."""


@dataclass
class Lookup:
    """How the cache answers a query (cache-lookup, Fig. 15): ``match_types`` holds the
    match type of each use of a region and ``regions_used`` that region's condition;
    ``remainder`` is the XPath text the source is asked (``None``: the cache answers
    everything), ``remainder_parts`` its conjunctions with their windows (each becomes a
    region, unless the lookup was ``cut_short`` at its budget of match-type calls: then
    what it had not looked up is fetched but kept in no region); ``match_calls`` and
    ``match_counts`` count every match-type call (disjoint ones too); ``fallbacks``:
    regions that gave way because they would have split the remainder too far
    (:mod:`cache.lookup`)."""

    match_types: list[str] = field(default_factory=list)
    regions_used: list[str] = field(default_factory=list)
    remainder: str | None = None
    remainder_parts: list[tuple[str, Window | None]] = field(default_factory=list)
    match_calls: int = 0
    match_counts: dict[str, int] = field(default_factory=dict)
    lookup_seconds: float = 0.0
    fallbacks: int = 0
    cut_short: bool = False


@dataclass
class QueryResult(Lookup):
    """The answer to one query and how it was found: ``items`` is exactly what the
    source would return for the query (``times`` their times, in a timed cache);
    ``from_cache`` and ``from_source`` count the items found in regions and those the
    source returned for the remainder."""

    items: dict[str, bytes] = field(default_factory=dict)
    from_cache: int = 0
    from_source: int = 0
    times: dict[str, float] = field(default_factory=dict)
    source_seconds: float = 0.0
    regions_added: int = 0


class SemanticCache:
    """Regions of query results per concept over ``source``, within ``capacity_bytes``.

    ``max_age`` / ``max_idle`` (seconds, ``None``: no limit) are the TTL coherence limits
    on a region's collection and last access; ``clock`` gives those times (and is what
    :meth:`regions` reports). Queries run one at a time (a lock): a region is added only
    once its data is in, so the regions stay disjoint."""

    def __init__(self, source: Source, capacity_bytes: int = defaults.CAPACITY_BYTES, *, timed: bool = False,
                 max_age: float | None = defaults.MAX_AGE_SECONDS, max_idle: float | None = defaults.MAX_IDLE_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self._source, self._timed, self._clock = source, timed, clock
        self._store = RegionStore(capacity_bytes, max_age, max_idle)
        self._lock = threading.Lock()
        self._seq = 0
        self._stats: Counter = Counter()

    # -- queries ------------------------------------------------------------------------

    def query(self, concept: str, condition: "Condition | str", window: "Window | tuple[float, float] | None" = None,
              *, on_cached: Callable[[dict[str, bytes]], None] | None = None) -> QueryResult:
        """The items of ``concept`` that satisfy ``condition`` (in ``window``, for a timed
        cache). ``on_cached`` receives the part found in the cache before the source is
        asked for the rest (to stream it first)."""
        concept, cond, win = concept_path(concept), as_condition(condition), self._window(window)
        with self._lock:
            now = self._clock()
            self._stats["expired"] += self._store.expire(now)
            self._stats["queries"] += 1
            result = QueryResult()
            plan, groups = self._lookup(result, concept, cond, win)
            self._take_cached(result, plan.used, Probe(concept, str(cond)), win, now)
            if on_cached is not None:
                on_cached(dict(result.items))
            for region in plan.evict:
                self._store.remove(region)
            self._fetch(result, concept, groups, set(plan.unkept), now)
            self._stats["evicted"] += self._store.evict() + len(plan.evict)
            self._stats.update(items_from_cache=result.from_cache, items_from_source=result.from_source,
                               fallbacks=plan.fallbacks, match_calls=plan.calls, cut_short=int(result.cut_short))
            return result

    def explain(self, concept: str, condition: "Condition | str",
                window: "Window | tuple[float, float] | None" = None) -> Lookup:
        """How :meth:`query` would answer now, without asking the source or changing
        anything (no access time, no region added or given up)."""
        concept, cond, win = concept_path(concept), as_condition(condition), self._window(window)
        with self._lock:
            result = Lookup()
            self._lookup(result, concept, cond, win)
            return result

    def _lookup(self, result: Lookup, concept: str, cond: Condition, win: Window | None
                ) -> tuple[Plan, dict[Window | None, list[Conjunct]]]:
        """cache-lookup over the concept's regions, described in ``result``; the plan and
        the remainder's parts grouped by window (one source call each)."""
        t0 = time.perf_counter()
        plan = cache_lookup(self._conjuncts(cond, win), self._store.of(concept))
        groups: dict[Window | None, list[Conjunct]] = {}
        for part in plan.remainder + plan.unkept:
            groups.setdefault(Window.from_range(time_range(part)) if self._timed else None, []).append(part)
        result.lookup_seconds = time.perf_counter() - t0
        result.match_calls, result.match_counts, result.fallbacks = plan.calls, dict(plan.counts), plan.fallbacks
        result.cut_short = bool(plan.unkept)
        for region, outcome in plan.used:
            result.match_types.append(outcome)
            result.regions_used.append(region.condition)
        result.remainder_parts = [(text(p), w) for w, group in groups.items() for p in group]
        result.remainder = " or ".join(_disjunction(group) for group in groups.values()) or None
        return plan, groups

    def _window(self, window) -> Window | None:
        if not self._timed:
            if window is not None:
                raise WindowError("this cache keeps no times (make it with timed=True to query windows)")
            return None
        if window is None:
            raise WindowError("a timed cache needs the query's window")
        return Window.of(window)

    @staticmethod
    def _conjuncts(cond: Condition, win: Window | None) -> list[Conjunct]:
        extra = win.lits() if win is not None else ()
        out = []
        for conj in cond.parts:
            conj = conj + extra
            if satisfiable(conj):
                out.append(simplify(conj))
        return out

    def _take_cached(self, result: QueryResult, used: Sequence[tuple[Region, str]], probe: Probe,
                     win: Window | None, now: float) -> None:
        whole: dict[Region, bool] = {}
        for region, outcome in used:
            whole[region] = whole.get(region, False) or outcome in (EXACT, CONTAINED)
        for region, take_all in whole.items():
            region.last_access = now
            for item_id, xml in region.items.items():
                if item_id in result.items:
                    continue
                t = region.times.get(item_id)
                if take_all or ((win is None or win.contains(t)) and probe(parse_item(xml))):
                    result.items[item_id] = xml
                    if t is not None:
                        result.times[item_id] = t
        result.from_cache = len(result.items)

    # -- the remainder --------------------------------------------------------------------

    def _fetch(self, result: QueryResult, concept: str, groups: dict[Window | None, list[Conjunct]],
               unkept: set[Conjunct], now: float) -> None:
        """Ask the source for the remainder (one call per window) and keep each part's
        items as a new region (section 5.5; not the ``unkept`` parts): an item goes to
        every part whose condition (and window) it meets, and into the result if it meets one."""
        t0 = time.perf_counter()
        for win, group in groups.items():
            rows = self._rows(concept, _disjunction(group), win)
            self._stats["source_calls"] += 1
            probes = [Probe(concept, text(p)) for p in group]
            kept: list[tuple[dict[str, bytes], dict[str, float]]] = [({}, {}) for _ in group]
            for item_id, xml, t in rows:
                root = parse_item(xml)
                inside = [i for i, probe in enumerate(probes)
                          if (win is None or (t is not None and win.contains(t))) and probe(root)]
                for i in inside:
                    kept[i][0][item_id] = xml
                    if t is not None:
                        kept[i][1][item_id] = t
                if inside and item_id not in result.items:
                    result.items[item_id] = xml
                    result.from_source += 1
                    if t is not None:
                        result.times[item_id] = t
            for part, (items, times) in zip(group, kept):
                if part in unkept:
                    continue
                self._seq += 1
                self._store.add(Region(concept, part, text(part), win, items, times, created=now, seq=self._seq))
                result.regions_added += 1
        result.source_seconds = time.perf_counter() - t0

    def _rows(self, concept: str, condition: str, win: Window | None) -> list[tuple[str, bytes, float | None]]:
        """The source's answer, read whole before any region changes, and checked."""
        rows = self._source(concept, condition) if win is None else self._source(concept, condition, win)
        out = []
        for row in rows:
            want = 3 if self._timed else 2
            if not isinstance(row, tuple) or len(row) != want:
                shape = "(item_id, xml_bytes, time)" if self._timed else "(item_id, xml_bytes)"
                raise SourceError(f"the source answered {row!r:.80}, not {shape}")
            item_id, xml = row[0], row[1]
            if not isinstance(item_id, str) or not isinstance(xml, (bytes, bytearray)):
                raise SourceError(f"the source answered {row!r:.80}: an item id is a str and an item bytes")
            t = float(row[2]) if self._timed else None
            out.append((item_id, bytes(xml), t))
        return out

    # -- inspection and upkeep ------------------------------------------------------------

    def regions(self) -> list[RegionInfo]:
        """Every region: ``(concept, condition, item count, bytes, created, last access)``
        with ``.window``; ``condition`` is XPath predicate text that lxml evaluates to
        exactly the region's items (among those in its window)."""
        with self._lock:
            return [RegionInfo.of(r) for r in sorted(self._store, key=lambda r: r.seq)]

    def stats(self) -> dict[str, int | float]:
        """Counters since the cache was made, and what it holds now."""
        with self._lock:
            return {"regions": len(self._store), "bytes": self._store.bytes,
                    "capacity_bytes": self._store.capacity_bytes, **self._stats}

    def clear(self, concept: str | None = None) -> int:
        """Forget every region (of ``concept``), e.g. when the source's data changed; how many."""
        with self._lock:
            return self._store.clear(None if concept is None else concept_path(concept))


def _disjunction(parts: Sequence[Conjunct]) -> str:
    return " or ".join(text(p) for p in parts)
