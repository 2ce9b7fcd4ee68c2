"""Map() relaxes profiles without false negatives; routing tables apply deltas safely."""

import doctest
import random

import pytest

import routing.dnf
import routing.table
from routing.dnf import TRUE, map_profile
from routing.table import Delta, RoutingTable
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema


@pytest.mark.parametrize("module", [routing.dnf, routing.table])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("profile, expected", [
    ("/a/b", [["/a/b"]]),
    ("/a[b/@c = 'x']/d", [["/a/b[@c = 'x']", "/a/d"]]),
    ("/a[@x = '1' or not(@y)]//b", [["/a[@x = '1' or not(@y)]//b"]]),
    ("/a[not(b)]", [["/a"]]),
    ("/a[b][2]", [["/a/b"]]),
    ("/a[b or c]", [["/a/b"], ["/a/c"]]),
    ("/a[.//b[text() = 't']]", [["/a//b[text() = 't']"]]),
    ("/a[3 > b]", [["/a/b[. < 3]"]]),
    ("/a[starts-with(b/@u, 'http')]", [["/a/b[starts-with(@u, 'http')]"]]),
    ("/a/text()", [["/a[text()]"]]),
])
def test_map_examples(profile, expected):
    assert sorted(sorted(c) for c in map_profile(profile)) == expected


def test_or_explosion_is_relaxed_not_expanded():
    profile = "/a[" + " and ".join(f"(b{i} or c{i})" for i in range(8)) + "]"
    q = map_profile(profile)
    assert len(q) <= routing.dnf.MAX_DISJUNCTS
    assert q != TRUE


def _corpus(seed, n_profiles, n_docs, **kw):
    schema = Schema.nitf()
    profiles = ProfileGenerator(schema, seed=seed, **kw).batch(n_profiles)
    docs = [DocGenerator(schema, doc_depth=6, max_repeats=3, seed=seed * 1000 + i).generate() for i in range(n_docs)]
    return profiles, docs


@pytest.mark.parametrize("seed, kw", [
    (1, dict(n_preds=(1, 2), n_nested=1, p_star=0.2, p_desc=0.2)),
    (2, dict(n_preds=(0, 2), n_nested=2, rich=0.5)),
    (3, dict(n_preds=0, n_nested=0)),
])
def test_map_never_loses_a_match(seed, kw):
    """Differential: every message a profile matches, its routing query matches too."""
    profiles, docs = _corpus(seed, 1500, 25, **kw)
    engine, table = Engine(), RoutingTable("x")
    for i, p in enumerate(profiles):
        engine.add(f"p{i}", p)
        table.apply(f"p{i}", Delta(f"p{i}", 1, map_profile(p)))
    routed_total = matched_total = 0
    for doc in docs:
        matched = engine.match(doc)
        routed = table.route(doc)
        assert matched <= routed, f"false negatives: {sorted(matched - routed)[:5]}"
        routed_total += len(routed)
        matched_total += len(matched)
    # A relaxation, but not a trivial one: the table still filters.
    assert routed_total < len(profiles) * len(docs)
    assert matched_total <= routed_total


def test_deltas_are_idempotent_and_order_independent():
    rnd = random.Random(4)
    profiles, _ = _corpus(5, 40, 0, n_preds=(0, 1))
    deltas = []
    for i, p in enumerate(profiles):
        link = f"l{i % 3}"
        deltas.append((link, Delta(f"p{i}", 1, map_profile(p))))
        if i % 4 == 0:
            deltas.append((link, Delta(f"p{i}", 2, map_profile(profiles[(i + 1) % len(profiles)]))))
        if i % 5 == 0:
            deltas.append((link, Delta(f"p{i}", 3, None)))
    reference = RoutingTable("x")
    for link, d in deltas:
        reference.apply(link, d)
    for _ in range(5):
        shuffled = deltas + rnd.sample(deltas, len(deltas) // 2)  # replays too
        rnd.shuffle(shuffled)
        table = RoutingTable("x")
        for link, d in shuffled:
            table.apply(link, d)
        assert table.links == reference.links
        for link in reference.links:
            assert table.entry(link) == reference.entry(link)
        assert table.stats() == reference.stats()


def test_deleting_the_last_profile_below_a_link_removes_the_entry():
    t = RoutingTable("b4")
    t.apply("b5", Delta("q1", 1, map_profile("/nitf")))
    t.apply("b5", Delta("q2", 1, map_profile("/nitf")))
    t.apply("b5", Delta("q1", 2, None))
    assert t.links == ["b5"]
    t.apply("b5", Delta("q2", 2, None))
    assert t.links == [] and t.stats()["atoms"] == 0
    assert t.route(b"<nitf/>") == set()
    t.apply("b5", Delta("q2", 1, map_profile("/nitf")))  # a late, older add does not resurrect it
    assert t.links == []


def test_delta_json_round_trip():
    d = Delta("q", 3, map_profile("/a[b or c]"))
    assert Delta.from_json(d.to_json()) == d
    assert Delta.from_json(Delta("q", 4, None).to_json()).query is None
