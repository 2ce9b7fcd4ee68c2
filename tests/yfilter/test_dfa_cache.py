"""The lazy DFA cache: bounded, and flushing it never changes a result. Run on both
runtimes: in the native one the DFA holds the profiles without predicates only, in
the Python one all of them (so its cache fills faster)."""

import pytest

from lxml import etree

from tests.yfilter.oracle import lxml_matches
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema


def _setup(budget, runtime="python"):
    s = Schema.nitf()
    profiles = ProfileGenerator(s, n_preds=(0, 2), n_nested=1, seed=21).batch(1500)
    e = Engine(dfa_budget=budget, runtime=runtime)
    for i, p in enumerate(profiles):
        e.add(str(i), p)
    docs = DocGenerator(s, doc_depth=7, seed=22)
    return e, [docs.generate() for _ in range(8)]


@pytest.mark.parametrize("runtime, budget", [("python", 2_000), ("native", 60)])
def test_tiny_budget_flushes_but_agrees_with_large_budget(runtime, budget):
    small, docs = _setup(budget=budget, runtime=runtime)
    large, _ = _setup(budget=10_000_000, runtime=runtime)
    for _ in range(2):
        for d in docs:
            assert small.match(d) == large.match(d)
    st = small.stats()
    assert st["dfa_flushes"] > 0
    assert large.stats()["dfa_flushes"] == 0
    assert st["dfa_units"] <= budget  # the cache is flushed as soon as it passes the budget


def test_cache_is_reused_across_messages():
    e, docs = _setup(budget=10_000_000)
    e.match(docs[0])
    n = e.stats()["dfa_states"]
    e.match(docs[0])
    assert e.stats()["dfa_states"] == n  # the same message builds nothing new


def test_new_values_build_no_new_states():
    # The DFA runs on guard-free shapes: a message with the same structure and other
    # values meets exactly the same states (values only go through the indexes).
    e, docs = _setup(budget=10_000_000)
    root = etree.fromstring(docs[0])
    e.match(docs[0])
    n = e.stats()["dfa_states"]
    values = sorted({v for el in root.iter() for v in el.attrib.values()})
    for el in root.iter():
        for a, v in el.attrib.items():
            el.set(a, values[(values.index(v) + 1) % len(values)])
    other = etree.tostring(root)
    assert other != docs[0]
    assert e.match(other) == lxml_matches({pid: e.profile(pid) for pid in e.ids()}, other)
    assert e.stats()["dfa_states"] == n
