"""Randomized differential test of the semantic cache against lxml.

Seeded random query sequences over random items with integer and string attributes (and
a repeated child element), conditions built from ``=``, ``!=``, ``<``, ``<=``, ``>``,
``>=``, ``contains``, existence, ``and``, ``or`` and ``not``; after every query:

* the result is exactly what lxml finds over all items (``boolean(/item[condition])``,
  and the item's time in the window for a timed cache);
* the regions are pairwise disjoint (no item in two of them);
* the condition text of every new region selects, by lxml over all items, exactly the
  region's items (in its window);
* a query inside cached regions (the same query again, or one narrowed) fetches 0 items
  from the source, and the same query again asks the source nothing.

The default run (2,000 sequences of 5 queries over 16 items) keeps under a minute;
``pytest -m slow`` runs 8,000 sequences of 8 queries over 24 items.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from lxml import etree

from cache import SemanticCache, Window, defaults

INTS = ["-2", "-1", "0", "1", "2", "3", "4", "2.0", " 3", "x", ""]
WORDS = ["", "a", "ab", "abc", "b", "ba", "bab", "c", "3", "ca"]
SUBS = ["a", "b", "ab", "ba", "c", "bc", "abc"]
OPS = ["=", "!=", "<", "<=", ">", ">="]


def random_item(rng: random.Random) -> bytes:
    el = etree.Element("item")
    for name in ("a", "b"):
        if rng.random() < 0.8:
            el.set(name, rng.choice(INTS[:7]) if rng.random() < 0.85 else rng.choice(INTS[7:]))
    for name in ("s", "t"):
        if rng.random() < 0.8:
            el.set(name, rng.choice(WORDS))
    for _ in range(rng.choice([0, 0, 1, 2])):
        etree.SubElement(el, "c").text = rng.choice(WORDS + INTS[:5])
    return etree.tostring(el)


def random_atom(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        name, op = rng.choice("ab"), rng.choice(OPS)
        lit = str(rng.randint(-2, 4)) if rng.random() < 0.85 else f"'{rng.randint(-1, 3)}'"
        return f"@{name} {op} {lit}" if rng.random() < 0.9 else f"{lit} {op} @{name}"
    if r < 0.75:
        name = rng.choice("st")
        if rng.random() < 0.6:
            return f"@{name} {rng.choice(['=', '!='])} '{rng.choice(WORDS)}'"
        return f"contains(@{name}, '{rng.choice(SUBS)}')"
    if r < 0.85:
        return f"@{rng.choice('abst')}"
    if rng.random() < 0.5:
        return f"c {rng.choice(OPS)} {rng.randint(0, 3)}"
    return rng.choice([f"c = '{rng.choice(WORDS)}'", f"contains(c, '{rng.choice(SUBS)}')", "c"])


def random_condition(rng: random.Random, depth: int = 3) -> str:
    if depth == 0 or rng.random() < 0.35:
        return random_atom(rng)
    r = rng.random()
    if r < 0.15:
        return f"not({random_condition(rng, depth - 1)})"
    op = "and" if r < 0.6 else "or"
    return f"({random_condition(rng, depth - 1)} {op} {random_condition(rng, depth - 1)})"


def random_window(rng: random.Random) -> Window:
    lo = rng.randint(0, 8)
    hi = lo + rng.randint(0, 6)
    return Window(lo, hi, lo < hi and rng.random() < 0.2, lo < hi and rng.random() < 0.2)


def holds(condition: str, root) -> bool:
    return bool(root.xpath(f"boolean(/item[{condition}])"))


@dataclass
class Source:
    """The items, answering with lxml (the oracle's own evaluation), counting what it sends."""

    items: dict[str, bytes]
    times: dict[str, float]
    roots: dict = field(default_factory=dict)
    calls: int = 0
    sent: int = 0

    def __post_init__(self) -> None:
        self.roots = {k: etree.fromstring(v) for k, v in self.items.items()}

    def select(self, condition: str, window: Window | None = None) -> list[str]:
        return [k for k, root in self.roots.items()
                if (window is None or window.contains(self.times[k])) and holds(condition, root)]

    def __call__(self, concept: str, condition: str, window: Window | None = None):
        assert concept == "/item"
        self.calls += 1
        found = self.select(condition, window)
        self.sent += len(found)
        if window is None:
            return [(k, self.items[k]) for k in found]
        return [(k, self.items[k], self.times[k]) for k in found]


def run_sequence(seed: int, n_items: int, n_queries: int, timed: bool) -> dict:
    """One sequence on a fresh cache; the checks of the module docstring after each query."""
    rng = random.Random(seed)
    items = {f"i{n}": random_item(rng) for n in range(n_items)}
    times = {k: float(rng.randint(0, 12)) for k in items}
    source = Source(items, times)
    cache = SemanticCache(source, capacity_bytes=1 << 30, timed=timed, max_age=None, max_idle=None)
    # condition, window, and the cache's fallback count once it was answered (-1 if its own
    # lookup had regions give way, which may have held other parts of its answer, or was
    # cut short, which keeps part of it in no region)
    asked: list[tuple[str, Window | None, int]] = []
    known: set[str] = set()
    stats = {"queries": 0, "inside": 0, "fallbacks": 0, "cut_short": 0}
    for step in range(n_queries):
        since = None                    # for a query inside cached regions: fallbacks when they were fetched
        r = rng.random()
        if asked and r < 0.25:
            cond, win, since = rng.choice(asked)
        elif asked and r < 0.45:
            base, win, since = rng.choice(asked)
            cond = f"({base}) and {random_atom(rng)}"
            if timed and rng.random() < 0.5 and win.lo + 1 < win.hi:
                win = Window(win.lo + 1, win.hi, win.lo_open, win.hi_open)
        elif asked and r < 0.6:
            base, win, _ = rng.choice(asked)
            cond = f"({base}) or {random_atom(rng)}"
        else:
            cond, win = random_condition(rng), random_window(rng) if timed else None
        where = f"seed {seed} step {step}: {cond!r} window {win}"
        fallbacks = cache.stats().get("fallbacks", 0)
        sent, calls = source.sent, source.calls
        result = cache.query("/item", cond, win)

        expected = source.select(cond, win)
        assert sorted(result.items) == sorted(expected), where
        assert all(result.items[k] == items[k] for k in expected), where
        if timed:
            assert result.times == {k: times[k] for k in expected}, where
        owner: dict[str, str] = {}
        for info in cache.regions():
            for k in info.item_ids:
                assert k not in owner, f"{where}: {k} in {owner[k]!r} and {info.condition!r}"
                owner[k] = info.condition
            if (info.condition, info.window) not in known:
                assert sorted(info.item_ids) == sorted(source.select(info.condition, info.window)), \
                    f"{where}: region {info.condition!r} {info.window}"
                known.add((info.condition, info.window))
        if since is not None and since == fallbacks and not result.fallbacks and not result.cut_short:
            stats["inside"] += 1
            assert source.sent == sent, f"{where}: inside cached regions, yet the source sent items"
            if (cond, win) in {(c, w) for c, w, _ in asked}:
                assert result.remainder is None and source.calls == calls, where
        stats["queries"] += 1
        stats["fallbacks"] += result.fallbacks
        stats["cut_short"] += result.cut_short
        asked.append((cond, win, -1 if result.fallbacks or result.cut_short else cache.stats().get("fallbacks", 0)))
    return stats


def run(seeds: range, n_items: int, n_queries: int) -> dict:
    total: dict = {}
    for seed in seeds:
        for k, v in run_sequence(seed, n_items, n_queries, timed=seed % 2 == 1).items():
            total[k] = total.get(k, 0) + v
    return total


def test_random_query_sequences_agree_with_lxml():
    total = run(range(2000), n_items=16, n_queries=5)
    assert total["queries"] == 10_000 and total["inside"] > 1500


def test_random_query_sequences_with_regions_giving_way_and_lookups_cut_short(monkeypatch):
    # Remainders may split into 3 parts at most and a lookup makes 40 match-type calls:
    # regions give way and lookups stop all the time, and the answers, the disjointness
    # and the region texts must stay right.
    monkeypatch.setattr(defaults, "MAX_PARTS", 3)
    monkeypatch.setattr(defaults, "MAX_MATCH_CALLS", 40)
    total = run(range(50_000, 50_400), n_items=16, n_queries=5)
    assert total["fallbacks"] > 200 and total["cut_short"] > 50


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_random_query_sequences_agree_with_lxml_long():
    total = run(range(10_000, 18_000), n_items=24, n_queries=8)
    assert total["queries"] == 64_000 and total["inside"] > 10_000
