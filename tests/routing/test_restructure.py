"""Early restructuring (issue 6 item 4): the three conditions, each failing alone,
turn it off; on the restructured document every remainder query gives exactly the
original profile's results on the message (oracle: the engine on the whole message,
as text and decoded), on generated and real news; nested bindings; restructuring
composes down a tree and from a projection; plans merge at parents and deletes undo
adds; the simulator's run with shared bindings is exact and saves bytes."""

import doctest
from collections import defaultdict

import pytest
from lxml import etree

import formats
import routing.restructure
from routing.projection import LinkPlan, Projection
from routing.restructure import (WRAPPER, RestructureError, Restructuring, TransformPlan, reads, remainder,
                                 remainder_namespaces)
from routing.simulate import Config, Simulation
from routing.workload import BoundFlwrGenerator
from yfilter import Engine
from yfilter.generators.docs import DocGenerator
from yfilter.generators.flwr import FlwrGenerator
from yfilter.generators.schema import Schema

Q = "for $s in $msg/nitf/body where $s/@id = 'x' return <r>{$s/p[2]}</r>"
DOC = (b"<nitf><head><title>T</title></head><body id='x'><p>one</p><p>two</p><q>no</q></body>"
       b"<body id='y'><p>three</p><p>four</p></body></nitf>")


def test_docstring_examples():
    assert doctest.testmod(routing.restructure).failed == 0


def _plan(*texts: str) -> TransformPlan:
    plan = TransformPlan()
    for t in texts:
        plan.add(reads(t))
    return plan


def test_profiles_sharing_a_binding_restructure():
    other = "for $b in /nitf/body return <t>{$b/q/text()}</t>"  # the same binding, written differently
    plan = _plan(Q, other)
    r = plan.restructuring()
    assert r is not None and plan.decision() is r and r.binding == "/nitf/body"
    assert r.apply(DOC) == (b'<onyx:bindings xmlns:onyx="urn:onyx:restructured"><body id="x"><p>one</p><p>two</p>'
                            b'<q>no</q></body><body id="y"><p>three</p><p>four</p></body></onyx:bindings>')


def test_a_filter_below_the_link_turns_restructuring_off():  # condition 1
    plan = _plan(Q)
    plan.add(reads("/nitf/body"))
    assert plan.restructuring() is None and plan.projection() is None and plan.decision() is None
    plan.remove(reads("/nitf/body"))
    assert plan.restructuring() is not None


def test_different_bindings_fall_back_to_projection():  # condition 2: predicates included
    plan = _plan(Q, "for $s in $msg/nitf/body[@id = 'x'] return <r>{$s/p}</r>")
    assert plan.restructuring() is None
    assert isinstance(plan.decision(), Projection) and plan.decision() is plan.projection()


def test_a_clause_reading_outside_its_binding_turns_restructuring_off(monkeypatch):  # condition 3
    # The grammar cannot say it yet; an extension that could would show in the need
    # analysis as a path that does not start at the binding.
    real = routing.restructure.clause_keeps

    def reads_an_absolute_path(q, ctx):
        return real(q, ctx) | {((("/", "nitf"), ("/", "head")), True)}

    monkeypatch.setattr(routing.restructure, "clause_keeps", reads_an_absolute_path)
    outside = reads(Q)
    assert not outside.shape.inside
    plan = TransformPlan()
    plan.add(outside)
    assert plan.restructuring() is None and plan.projection() is not None
    monkeypatch.undo()
    plan.add(reads(Q))
    assert plan.restructuring() is None  # still one profile reading outside
    plan.remove(outside)
    assert plan.restructuring() is not None


def _equal_results(groups: dict[str, list[str]], docs: list[bytes], namespaces: dict) -> int:
    """For each group of profiles sharing a binding, the remainders on the restructured
    document against the profiles on the message, as text and decoded; results compared."""
    compared = 0
    for binding, texts in groups.items():
        plan = TransformPlan()
        full, rest = Engine(namespaces), Engine(remainder_namespaces(namespaces))
        for i, t in enumerate(texts):
            plan.add(reads(t, namespaces))
            full.add(f"q{i}", t)
            rest.add(f"q{i}", remainder(t, namespaces))
        r = plan.restructuring()
        assert r is not None and r.binding == binding
        for doc in docs:
            for message in (doc, formats.decode("text", doc)):
                restructured = r.apply(message)
                want, got = full.run(message), rest.run(restructured)
                assert got == want, (binding, doc)
                assert r.again(restructured) == restructured
                compared += sum(len(v) for v in want.values())
    return compared


def _groups(texts: list[str], namespaces: dict | None = None) -> dict[str, list[str]]:
    out = defaultdict(list)
    for t in texts:
        out[reads(t, namespaces).shape.binding].append(t)
    return dict(out)


@pytest.mark.parametrize("seed", [1, 2])
def test_remainders_on_the_restructured_document_give_the_original_results(seed):
    schema = Schema.nitf()
    gen = BoundFlwrGenerator(schema, [], seed=seed, rich=0.6, p_desc=0.3)  # positions, not(), text()
    gen.bindings = gen.draw_bindings(4)
    shared = [gen.spec().text() for _ in range(80)]
    alone = [FlwrGenerator(schema, seed=seed, rich=0.6).spec().text() for _ in range(15)]
    groups = {**_groups(alone), **_groups(shared)}
    docs = [DocGenerator(schema, seed=seed * 100 + j).generate() for j in range(12)]
    assert _equal_results(groups, docs, {}) > 100


def test_remainders_on_real_news_with_namespaces(corpus_files):
    docs = [f.read_bytes() for f in corpus_files]
    schema = Schema.from_documents([etree.fromstring(d) for d in docs])
    ns = dict(schema.namespaces)
    gen = BoundFlwrGenerator(schema, [], seed=7, rich=0.2)
    gen.bindings = gen.draw_bindings(3) + [("//*", "nitf")]  # every element: nested bindings everywhere
    texts = [gen.spec().text() for _ in range(40)]
    assert _equal_results(_groups(texts, ns), docs, ns) > 100


def test_nested_bindings_are_each_listed_once_in_document_order():
    doc = b"<r><a k='1'><b>1</b><c/><a k='2'><b>2</b></a></a><a k='3'><b>3</b></a></r>"
    texts = ["for $a in $msg//a return <x>{$a/b}</x>", "for $a in $msg//a where $a/@k > 1 return <y>{$a}</y>"]
    r = _plan(texts[0]).restructuring()
    assert r.apply(doc) == (b'<onyx:bindings xmlns:onyx="urn:onyx:restructured"><a k="1"><b>1</b></a>'
                            b'<a k="2"><b>2</b></a><a k="3"><b>3</b></a></onyx:bindings>')
    assert _equal_results(_groups(texts), [doc], {}) == 2 * (3 + 2)  # as text and decoded
    whole = _plan(*texts).restructuring().apply(doc)  # {$a} keeps the nested a inside its parent's copy
    assert etree.fromstring(whole)[0].find("a/b").text == "2" and len(etree.fromstring(whole)) == 3


def test_restructuring_what_a_link_above_sent_equals_restructuring_the_message():
    schema = Schema.nitf()
    gen = BoundFlwrGenerator(schema, [("/nitf/body//*[p]", "body.content")], seed=5, rich=0.3)
    texts = [gen.spec().text() for _ in range(30)]
    upper, lower = _plan(*texts), _plan(*texts[::3])
    assert upper.restructuring() != lower.restructuring()
    others = [FlwrGenerator(schema, seed=9).spec().text() for _ in range(10)]  # more bindings above
    above = LinkPlan()
    for t in texts + others:
        above.add(reads(t).need)
    compared = 0
    for j in range(15):
        doc = DocGenerator(schema, seed=700 + j).generate()
        direct = lower.restructuring().apply(doc)
        assert lower.restructuring().again(upper.restructuring().apply(doc)) == direct
        assert lower.restructuring().apply(above.projection().apply(doc)) == direct
        compared += len(etree.fromstring(direct))
    assert compared > 0


def test_plans_merge_at_parents_and_deletes_undo_adds():
    a = "for $s in $msg/nitf/body return <r>{$s/p}</r>"
    b = "for $s in $msg/nitf/body where $s/q return <r>{$s/@id}</r>"
    c = "for $s in $msg/nitf/head return <r>{$s/title}</r>"
    left, right, parent = _plan(a), _plan(b, b), _plan(a)
    parent.merge(left)
    parent.merge(right)
    assert parent.state() == _plan(a, a, b, b).state() and parent.restructuring() is not None
    before = parent.restructuring()
    parent.add(reads(c))
    assert parent.restructuring() is None and parent.projection() is not None
    parent.remove(reads(c))
    for t in (a, a, b):
        parent.remove(reads(t))
    assert parent.state() == _plan(b).state() and parent.restructuring() != before
    parent.remove(reads(b))
    assert parent.state() is None
    with pytest.raises(ValueError, match="never added"):
        parent.remove(reads("/nitf"))


def test_bad_input_is_refused_with_a_reason():
    r = _plan(Q).restructuring()
    with pytest.raises(RestructureError, match="not a restructured document"):
        r.again(DOC)
    with pytest.raises(RestructureError, match="prefix 'onyx'"):
        remainder_namespaces({"onyx": "http://example.com/"})
    assert remainder_namespaces({"n": "u"}) == {"n": "u", "onyx": "urn:onyx:restructured"}
    assert WRAPPER == "{urn:onyx:restructured}bindings" and isinstance(r, Restructuring)


@pytest.mark.parametrize("churn, generalize", [(0.3, False), (0.3, True)])
def test_simulator_with_shared_bindings_is_exact_and_saves_bytes(churn, generalize):
    from routing.budget import Budget

    r = Simulation(Config(brokers=20, profiles=60, messages=30, churn=churn, transform=1.0, bindings=3,
                          generalize=generalize, budget=Budget(atoms=40), seed=1)).run()
    assert r["false_negatives"] == r["restructured_false_negatives"] == 0
    assert r["delivery_mismatches"] == r["restructured_delivery_mismatches"] == 0
    assert r["projection_result_mismatches"] == r["restructured_result_mismatches"] == 0
    assert r["table_mismatches"] == 0  # plans and remainder tables too
    assert r["expected_deliveries"] > 0 and r["restructured_link_messages"] > 0
    assert r["restructured_link_bytes"] < r["projected_link_bytes"] < r["link_bytes"]
