"""SemanticCache: the public contract, sources that misbehave, items with several concept
elements, replacement (LRU, FIFO ties, bytes) and coherence (TTL), time windows, and
the fallback for remainders that split too far."""

from __future__ import annotations

import pytest
from lxml import etree

from cache import CacheError, QueryResult, SemanticCache, Window, defaults
from cache.errors import ConceptError, SourceError, WindowError


def holds(concept: str, condition: str, xml: bytes) -> bool:
    return bool(etree.fromstring(xml).xpath(f"boolean({concept}[{condition}])"))


class ListSource:
    def __init__(self, items: dict[str, bytes], times: dict[str, float] | None = None) -> None:
        self.items, self.times = items, times
        self.asked: list[tuple] = []

    def __call__(self, concept, condition, window=None):
        self.asked.append((concept, condition, window))
        found = [k for k, v in self.items.items() if holds(concept, condition, v)
                 and (window is None or window.contains(self.times[k]))]
        return [(k, self.items[k]) if window is None else (k, self.items[k], self.times[k]) for k in found]


PAINTINGS = {f"p{y}": f"<painting year='{y}' artist='{a}'/>".encode()
             for y, a in [(1650, "Rembrandt"), (1750, "van Gogh"), (1800, "Monet"), (1850, "Monet"), (1950, "Dali")]}


def test_the_contract():
    source = ListSource(PAINTINGS)
    cache = SemanticCache(source, capacity_bytes=64 << 20)
    result = cache.query("/painting", "@year >= 1700 and @year <= 1900 or @artist = 'Monet'")
    assert isinstance(result, QueryResult)
    assert result.items == {k: PAINTINGS[k] for k in ("p1750", "p1800", "p1850")}
    assert (result.from_cache, result.from_source, result.match_types) == (0, 3, [])
    # The query's disjuncts overlap: each becomes a region after staged negation of the ones before.
    assert result.remainder == ("@year >= 1700 and @year <= 1900 or @artist = 'Monet' and not(@year >= 1700) "
                                "or @artist = 'Monet' and @year > 1900")
    regions = cache.regions()
    assert all(len(r) == 6 for r in regions)
    for concept, condition, count, size, created, last in regions:
        assert concept == "/painting" and size >= count and created <= last
        assert count == sum(holds(concept, condition, v) for v in PAINTINGS.values())
    again = cache.query("/painting", "@artist = 'Monet'")
    assert (again.from_cache, again.from_source, again.remainder) == (2, 0, None)
    assert len(source.asked) == 1


def test_the_remainder_is_what_the_source_is_asked():
    source = ListSource(PAINTINGS)
    cache = SemanticCache(source)
    cache.query("/painting", "@year <= 1800")
    r = cache.query("/painting", "@year >= 1700 and @year <= 1900")
    assert source.asked[-1][1] == r.remainder == "@year > 1800 and @year <= 1900"
    assert r.remainder_parts == [("@year > 1800 and @year <= 1900", None)]


def test_on_cached_gets_the_cached_part_before_the_source_is_asked():
    events = []
    source = ListSource(PAINTINGS)

    def asking(*args):
        events.append("source")
        return source(*args)

    cache = SemanticCache(asking)
    cache.query("/painting", "@year <= 1800")
    cache.query("/painting", "@year >= 1700", on_cached=lambda items: events.append(sorted(items)))
    assert events == ["source", ["p1750", "p1800"], "source"]


@pytest.mark.parametrize("rows", [[("p1", "<x/>")], [("p1",)], [(1, b"<x/>")], ["p1"]])
def test_a_source_answering_nonsense_is_refused_and_changes_nothing(rows):
    cache = SemanticCache(lambda concept, condition: rows)
    with pytest.raises(SourceError):
        cache.query("/x", "@a = 1")
    assert cache.regions() == []


def test_a_failing_source_changes_nothing():
    def broken(concept, condition):
        raise ConnectionError("down")

    cache = SemanticCache(broken)
    with pytest.raises(ConnectionError):
        cache.query("/x", "@a = 1")
    assert cache.regions() == []


def test_a_source_returning_too_much_or_broken_xml_still_gives_the_exact_answer():
    sloppy = lambda concept, condition: [*PAINTINGS.items(), ("bad", b"<painting year='1750'")]  # noqa: E731
    cache = SemanticCache(sloppy)
    r = cache.query("/painting", "@year <= 1800")
    assert sorted(r.items) == ["p1650", "p1750", "p1800"]
    [info] = cache.regions()
    assert info.item_ids == {"p1650", "p1750", "p1800"}


def test_items_with_several_concept_elements_are_deduplicated_by_id():
    # Archived messages: the concept is /nitf/head/pubdata, and a message may hold two.
    msgs = {"m1": b"<nitf><head><pubdata edition.area='SF'/><pubdata edition.area='NY'/></head></nitf>",
            "m2": b"<nitf><head><pubdata edition.area='SF'/></head></nitf>",
            "m3": b"<nitf><head><pubdata edition.area='LA'/></head></nitf>"}
    source = ListSource(msgs)
    cache = SemanticCache(source)
    assert sorted(cache.query("/nitf/head/pubdata", "@edition.area = 'SF'").items) == ["m1", "m2"]
    assert sorted(cache.query("/nitf/head/pubdata", "@edition.area = 'NY'").items) == ["m1"]
    r = cache.query("/nitf/head/pubdata", "@edition.area = 'SF' or @edition.area = 'NY'")
    assert sorted(r.items) == ["m1", "m2"] and r.from_source == 0 and r.remainder is None
    # The regions are disjoint as conditions; m1 is in both because it holds an element of each.
    assert [sorted(i.item_ids) for i in cache.regions()] == [["m1", "m2"], ["m1"]]


def test_concepts_are_canonical_and_checked():
    source = ListSource(PAINTINGS)
    cache = SemanticCache(source)
    cache.query("$msg/painting", "@year < 1700")
    assert cache.query("/painting", "@year < 1700").remainder is None
    for bad in ("/painting[@x]", "/painting/@year", "painting", "//a:b"):
        with pytest.raises(ConceptError):
            cache.query(bad, "@year < 1700")


# -- replacement and coherence --------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sized_items(n: int) -> dict[str, bytes]:
    return {f"i{k}": f"<i n='{k}'>{'x' * 1000}</i>".encode() for k in range(n)}


def test_lru_evicts_the_least_recently_used_region_first():
    clock = Clock()
    items = sized_items(4)
    cache = SemanticCache(ListSource(items), capacity_bytes=3 * (1000 + 300 + defaults.REGION_OVERHEAD_BYTES),
                          clock=clock, max_age=None, max_idle=None)
    for k in range(3):
        clock.now += 1
        cache.query("/i", f"@n = {k}")
    clock.now += 1
    cache.query("/i", "@n = 0")                          # uses region 0: now the most recent
    clock.now += 1
    cache.query("/i", "@n = 3")                          # over capacity: region 1 goes
    assert [i.condition for i in cache.regions()] == ["@n = 0", "@n = 2", "@n = 3"]
    assert cache.stats()["evicted"] == 1


def test_ties_in_last_access_go_first_in_first_out():
    clock = Clock()                                       # the clock never moves: every T_L is equal
    items = sized_items(4)
    cache = SemanticCache(ListSource(items), capacity_bytes=2 * (1000 + 300 + defaults.REGION_OVERHEAD_BYTES),
                          clock=clock, max_age=None, max_idle=None)
    for k in range(4):
        cache.query("/i", f"@n = {k}")
    assert [i.condition for i in cache.regions()] == ["@n = 2", "@n = 3"]


def test_a_region_larger_than_the_capacity_answers_once_and_is_not_kept():
    cache = SemanticCache(ListSource(sized_items(3)), capacity_bytes=100)
    assert len(cache.query("/i", "@n >= 0").items) == 3
    assert cache.regions() == [] and cache.stats()["bytes"] == 0


def test_ttl_drops_old_and_idle_regions():
    clock = Clock()
    source = ListSource(PAINTINGS)
    cache = SemanticCache(source, clock=clock, max_age=100, max_idle=30)
    cache.query("/painting", "@year < 1700")
    cache.query("/painting", "@year > 1900")
    clock.now += 20
    cache.query("/painting", "@year < 1700")             # keeps region 1 from idling
    clock.now += 20                                       # region 2 idle for 40 s
    assert cache.query("/painting", "@year < 1700").remainder is None
    assert [i.condition for i in cache.regions()] == ["@year < 1700"]
    clock.now += 70                                       # region 1 collected 110 s ago
    assert cache.query("/painting", "@year < 1700").remainder == "@year < 1700"
    assert cache.stats()["expired"] == 2


def test_clear_forgets_regions():
    cache = SemanticCache(ListSource(PAINTINGS))
    cache.query("/painting", "@year < 1700")
    assert cache.clear("/painting") == 1 and cache.regions() == [] and cache.stats()["bytes"] == 0


# -- time windows --------------------------------------------------------------------------

def test_a_timed_cache_answers_windows_and_reuses_them():
    times = {k: float(n) for n, k in enumerate(PAINTINGS)}          # p1650 at 0 ... p1950 at 4
    source = ListSource(PAINTINGS, times)
    cache = SemanticCache(source, timed=True)
    first = cache.query("/painting", "@year > 1600", window=(0, 2))
    assert sorted(first.items) == ["p1650", "p1750", "p1800"] and first.times["p1800"] == 2.0
    r = cache.query("/painting", "@year > 1700", window=(1, 4))
    assert sorted(r.items) == ["p1750", "p1800", "p1850", "p1950"]
    assert (r.match_types, r.from_cache, r.from_source) == (["overlapping"], 2, 2)
    assert r.remainder_parts == [("@year > 1700", Window(2, 4, lo_open=True))]
    assert source.asked[-1][2] == Window(2, 4, lo_open=True)
    assert cache.query("/painting", "@year > 1800", window=(1.5, 3)).remainder is None
    assert [i.window for i in cache.regions()] == [Window(0, 2), Window(2, 4, lo_open=True)]


def test_windows_are_required_exactly_when_the_cache_is_timed():
    with pytest.raises(WindowError):
        SemanticCache(ListSource(PAINTINGS)).query("/painting", "@year > 1", window=(0, 1))
    with pytest.raises(WindowError):
        SemanticCache(ListSource(PAINTINGS), timed=True).query("/painting", "@year > 1")
    with pytest.raises(WindowError):
        SemanticCache(ListSource(PAINTINGS), timed=True).query("/painting", "@year > 1", window=(2, 1))
    assert issubclass(WindowError, CacheError)


def test_window_integer_bounds_for_a_source_with_integer_times():
    assert Window(10, 20).closed_integers() == (10, 20)
    assert Window(10, 20, lo_open=True, hi_open=True).closed_integers() == (11, 19)
    assert Window(10.5, 19.5).closed_integers() == (11, 19)


# -- remainders that split too far ---------------------------------------------------------

def test_a_region_that_would_split_the_remainder_too_far_gives_way(monkeypatch):
    items = {f"i{a}{b}": f"<i a='{a}' b='{b}'/>".encode() for a in range(4) for b in range(4)}
    source = ListSource(items)
    cache = SemanticCache(source)
    for k in range(4):
        cache.query("/i", f"@a = {k} and @b = {k}")
    monkeypatch.setattr(defaults, "MAX_PARTS", 2)
    r = cache.query("/i", "@a >= 0")
    # The first region splits @a >= 0 in two; each later one would make three parts, so gives way.
    assert r.fallbacks == 3 and r.match_types == ["contained"] and r.from_cache == 1
    assert sorted(r.items) == sorted(items) and r.from_source == 15
    assert [(i.condition, i.items) for i in cache.regions()] == [
        ("@a = 0 and @b = 0", 1), ("@a >= 0 and @a != 0", 12), ("@a = 0 and not(@b = 0)", 3)]
    assert cache.query("/i", "@a >= 0").remainder is None


def test_a_lookup_past_its_budget_stops_and_keeps_the_rest_in_no_region(monkeypatch):
    items = {f"i{a}": f"<i a='{a}'/>".encode() for a in range(6)}
    source = ListSource(items)
    cache = SemanticCache(source)
    for k in range(4):
        cache.query("/i", f"@a = {k}")
    monkeypatch.setattr(defaults, "MAX_MATCH_CALLS", 2)
    r = cache.query("/i", "@a >= 0")
    assert r.cut_short and r.match_calls == 2 and r.from_cache == 2
    assert r.remainder == "@a >= 0 and @a != 0 and @a != 1" and r.regions_added == 0
    assert sorted(r.items) == sorted(items) and r.from_source == 4
    assert [i.condition for i in cache.regions()] == ["@a = 0", "@a = 1", "@a = 2", "@a = 3"]


def test_explain_tells_how_a_query_would_be_answered_and_changes_nothing():
    clock = Clock()
    source = ListSource(PAINTINGS)
    cache = SemanticCache(source, clock=clock)
    cache.query("/painting", "@year <= 1800")
    clock.now += 5
    before = cache.regions()
    plan = cache.explain("/painting", "@year >= 1700 and @year <= 1900")
    assert plan.match_types == ["overlapping"] and plan.match_calls == 1
    assert plan.remainder == "@year > 1800 and @year <= 1900"
    assert cache.regions() == before and len(source.asked) == 1
    assert [tuple(r) for r in before] == [tuple(r) for r in cache.regions()]
