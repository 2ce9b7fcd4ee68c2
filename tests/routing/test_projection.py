"""Early projection (issue 6 item 4): a projected message gives every transformation
profile below the link exactly the results the whole message gives (oracle: the
engine's run on the whole message; position predicates included), projections
compose down a tree, and a filter below a link turns projection off."""

import doctest
import random
from pathlib import Path

import pytest

import routing.projection
from routing.projection import WHOLE, LinkPlan, Projection, need
from yfilter import Engine
from yfilter.generators.docs import DocGenerator
from yfilter.generators.flwr import FlwrGenerator
from yfilter.generators.schema import Schema

NEWS = Path("/work/shared/corpus/news")


def test_docstring_examples():
    assert doctest.testmod(routing.projection).failed == 0


def _profiles(schema: Schema, n: int, seed: int, rich: float) -> list[str]:
    g = FlwrGenerator(schema, seed=seed, rich=rich)
    return [g.spec().text() for _ in range(n)]


def _check(engine: Engine, ids: list[str], docs: list[bytes], projection: Projection) -> tuple[int, int, int]:
    """Compare results on every document; (results compared, projected bytes, whole bytes)."""
    compared = small = big = 0
    for doc in docs:
        projected = projection.apply(doc)
        full, part = engine.run(doc), engine.run(projected)
        for pid in ids:
            assert part.get(pid) == full.get(pid), (pid, doc, projected)
            compared += len(full.get(pid, ()))
        small, big = small + len(projected), big + len(doc)
    return compared, small, big


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_projection_gives_every_profile_below_the_link_the_same_results(seed):
    schema = Schema.nitf()
    texts = _profiles(schema, 300, seed, rich=0.6)  # rich: positions, not(), functions, text()
    engine = Engine(dict(schema.namespaces))
    needs = {}
    for i, t in enumerate(texts):
        engine.add(f"q{i}", t)
        if (n := need(t, schema.namespaces)) is not WHOLE:
            needs[f"q{i}"] = n
    assert len(needs) == len(texts)
    docs = [DocGenerator(schema, seed=seed * 100 + j).generate() for j in range(25)]
    rng = random.Random(seed)
    compared, saved = 0, []
    for size in (1, 1, 5, 40, len(needs)):  # links with few and with many profiles below
        below = rng.sample(sorted(needs), size)
        plan = LinkPlan()
        for pid in below:
            plan.add(needs[pid])
        n, small, big = _check(engine, below, docs, plan.projection())
        assert small <= big
        compared, saved = compared + n, saved + [big - small]
    assert compared > 0 and max(saved) > 0


def test_projection_on_real_news_with_namespaces():
    files = sorted(NEWS.glob("*.xml"))
    if not files:
        pytest.skip("no news corpus")
    docs = [f.read_bytes() for f in files]
    from lxml import etree

    roots = [etree.fromstring(d) for d in docs]
    schema = Schema.from_documents(roots)
    texts = _profiles(schema, 200, 7, rich=0.2)
    engine = Engine(dict(schema.namespaces))
    plan = LinkPlan()
    for i, t in enumerate(texts):
        engine.add(f"q{i}", t)
        n = need(t, schema.namespaces)
        if n is not WHOLE:
            plan.add(n)
    ids = [f"q{i}" for i, t in enumerate(texts) if need(t, schema.namespaces) is not WHOLE]
    compared, small, big = _check(engine, ids, docs, plan.projection())
    assert compared > 0 and small < big


def test_projecting_a_projection_with_a_plan_further_down_equals_projecting_the_message():
    schema = Schema.nitf()
    texts = [t for t in _profiles(schema, 200, 5, rich=0.3) if need(t) is not WHOLE]
    lower, upper = LinkPlan(), LinkPlan()
    for i, t in enumerate(texts):
        upper.add(need(t))
        if i % 3 == 0:
            lower.add(need(t))
    for j in range(20):
        doc = DocGenerator(schema, seed=900 + j).generate()
        once = upper.projection().apply(doc)
        assert lower.projection().apply(once) == lower.projection().apply(doc)


def test_a_filter_below_the_link_needs_the_whole_message():
    flwr = "for $n in $msg/nitf where $n/head/title = 'x' return <r>{$n/body/@id}</r>"
    plan = LinkPlan()
    plan.add(need(flwr))
    first = plan.projection()
    assert str(first) == "/nitf\n/nitf/body\n/nitf/head/title (subtree)"
    plan.add(need("/nitf[head]"))
    assert plan.projection() is None
    plan.remove(need("/nitf[head]"))
    assert plan.projection() == first
    with pytest.raises(ValueError, match="never added"):
        plan.remove(WHOLE)


def test_merged_child_plans_equal_the_plan_of_all_their_profiles():
    texts = [t for t in _profiles(Schema.nitf(), 60, 11, rich=0.3) if need(t) is not WHOLE]
    a, b, both, parent = LinkPlan(), LinkPlan(), LinkPlan(), LinkPlan()
    for i, t in enumerate(texts):
        (a if i % 2 else b).add(need(t))
        both.add(need(t))
    parent.merge(a)
    parent.merge(b)
    assert parent.projection() == both.projection()


def test_positions_count_in_the_kept_node_set():
    doc = b"<r><q>a</q><p>1</p><q>b</q><p>2</p><s><p>3</p></s></r>"
    engine = Engine()
    texts = {"pos": "for $n in $msg/r/p[2] return <x>{$n}</x>",
             "star": "for $n in $msg/r where $n/*[2] = '1' return <x>{$n/s}</x>"}
    plan = LinkPlan()
    for pid, t in texts.items():
        engine.add(pid, t)
        plan.add(need(t))
    projected = plan.projection().apply(doc)
    assert b"<q>" in projected  # r/* keeps every child of r, so *[2] still counts the q's
    only_p = LinkPlan()
    only_p.add(need(texts["pos"]))
    assert only_p.projection().apply(doc) == b"<r><p>1</p><p>2</p></r>"
    assert engine.run(projected) == engine.run(doc) == {"pos": [b"<x><p>2</p></x>"],
                                                        "star": [b"<x><s><p>3</p></s></x>"]}
