"""One broker without transport (routing.node): Map/Collect/Aggregate and the data plane,
and an overlay of nodes wired in process against the centralized engine."""

import doctest
import random

import pytest

import routing.node
from routing.node import Forward, Node
from routing.overlay import builtin
from routing.budget import Budget
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator

NITF = b"<nitf><head><title>Tide</title><meta name='a'/></head><body><p>" + b"long " * 100 + b"</p></body></nitf>"
TRANSFORM = "for $h in $msg/nitf/head return <t>{$h/title/text()}</t>"


def test_docstring_examples():
    assert doctest.testmod(routing.node, optionflags=doctest.ELLIPSIS).failed == 0


def _overlay_of_nodes(budget=None):
    ov = builtin("figure4")
    # slow links: every transformation that leaves bytes out is worth it
    return {b: Node(b, ov, budget, bandwidth=1e4) for b in ov.brokers}


def _propagate(nodes, host, ups):
    """Deliver routing deltas hop by hop until none is left."""
    pending = [(host, u) for u in ups]
    while pending:
        child, up = pending.pop()
        pending += [(up.parent, u) for u in nodes[up.parent].collect(up.root, child, up.delta)]


def _publish(nodes, root, xml):
    """Route ``xml`` down ``root``'s tree as brokers do; returns every delivery, the
    bytes each link carried and how many links carried a transformed message."""
    out, carried, transformed = {}, {}, 0
    todo = [(root, xml, None)]
    while todo:
        b, doc, applied = todo.pop()
        for item in nodes[b].process(root, doc, None if applied else doc, applied=applied):
            if isinstance(item, Forward):
                transformed += item.transformed is not None
                sent = item.transformed.to_xml() if item.transformed is not None else doc
                carried[(b, item.link)] = sent
                todo.append((item.link, sent, item.effect))
            else:
                out[item[0]] = item[1]
    return out, carried, transformed


def test_an_old_version_changes_nothing_and_a_delete_leaves_a_tombstone():
    n = Node("b4", builtin("figure4"))
    assert n.host("p", 2, "/nitf") and n.host("p", 1, "/a") == [] and n.profiles["p"].text == "/nitf"
    assert n.drop("p", 2) == [] and n.drop("p", 3)[0].delta.query is None
    assert n.host("p", 3, "/a") == [] and "p" not in n.profiles and n.tombstones == {"p": 3}


def test_a_bad_profile_changes_nothing():
    n = Node("b4", builtin("figure4"))
    with pytest.raises(ValueError):
        n.host("p", 1, "/nitf[")
    assert n.profiles == {} and n.version == 0 and len(n.local) == 0


def test_links_carry_projections_while_every_profile_below_reads_only_parts():
    nodes = _overlay_of_nodes()
    _propagate(nodes, "b6", nodes["b6"].host("t1", 1, TRANSFORM, "t"))
    out, carried, _ = _publish(nodes, "b1", NITF)
    assert out == {"t1": [b"<t>Tide</t>"]}
    assert set(carried) == {("b1", "b2"), ("b2", "b4"), ("b4", "b6")}
    assert all(len(doc) < len(NITF) and b"long" not in doc for doc in carried.values())
    # a filter below b4 -> b5 needs the whole message on b1 -> b2 -> b4 -> b5, not on b4 -> b6
    _propagate(nodes, "b5", nodes["b5"].host("f1", 1, "/nitf/body", "t"))
    out, carried, _ = _publish(nodes, "b1", NITF)
    assert out == {"t1": [b"<t>Tide</t>"], "f1": [NITF]}
    assert carried[("b1", "b2")] == NITF and carried[("b4", "b5")] == NITF and len(carried[("b4", "b6")]) < len(NITF)
    # and when it goes, the projection comes back
    _propagate(nodes, "b5", nodes["b5"].drop("f1", 2))
    assert len(_publish(nodes, "b1", NITF)[1][("b1", "b2")]) < len(NITF)


def test_a_transformed_message_delivers_no_filter_result():
    from routing.incremental import need
    n = Node("b6", builtin("figure4"))
    n.host("f", 1, "/nitf")
    n.host("t", 1, TRANSFORM)
    assert set(n.deliver(NITF)) == {"f", "t"} and set(n.deliver(NITF, applied=need(TRANSFORM))) == {"t"}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("budget", [None, Budget(atoms=3, states=12, predicates=2)])
def test_an_overlay_of_nodes_delivers_what_the_centralized_engine_does(seed, budget):
    """Transformation profiles spread over the brokers, filters on some, messages from
    the generator: every result equals the centralized engine's, with exact and with
    generalized routing tables."""
    rng = random.Random(seed)
    schema = Schema.nitf()
    flwr, docs = FlwrGenerator(schema, seed=seed), DocGenerator(schema, seed=seed)
    paths = ProfileGenerator(schema, n_preds=(0, 1), seed=seed)
    nodes, truth = _overlay_of_nodes(budget), Engine()
    for i in range(60):
        # filters (which need the whole message) on b3 and b5 only, small transformations on
        # b6: the link b4 -> b6 carries projections
        if i < 3:
            text, host = [TRANSFORM, "for $d in $msg/nitf/head/docdata return <d>{$d/doc-id}</d>",
                          "for $p in $msg//p[1] return <p>{$p/text()}</p>"][i], "b6"
        elif rng.random() < 0.7:
            text, host = flwr.spec().text(), rng.choice(["b2", "b3", "b4", "b5"])
        else:
            text, host = paths.generate(), rng.choice(["b3", "b5"])
        _propagate(nodes, host, nodes[host].host(f"p{i}", 1, text, "t"))
        truth.add(f"p{i}", text)
    projected = 0
    for _ in range(40):
        xml = docs.generate()
        out, _, projections = _publish(nodes, "b1", xml)
        assert out == truth.run(xml, xml=xml)
        projected += projections
    assert projected  # the link to b6 carried projections


def test_a_lazy_atom_with_a_new_namespace_after_the_engine_was_built():
    """Regression: the URI's prefix was bound for the lazy atom but the built engine was
    not rebuilt, so the next eager atom with that URI was refused."""
    from routing.matcher import AtomEngine

    e = AtomEngine()
    e.acquire("/a")
    assert e.match(b"<a/>") == {"/a"}
    e.acquire_lazy("/{urn:x}q/{urn:x}r")
    e.acquire("/{urn:x}q")
    doc = b"<q xmlns='urn:x'><r/></q>"
    assert e.match(doc) == {"/{urn:x}q"} and e.holds("/{urn:x}q/{urn:x}r", doc)


def test_a_link_whose_header_would_be_too_long_carries_the_message_as_it_came():
    """Regression (bench.overlay, the transforms mix at 1k profiles): the path projection of
    hundreds of profiles with different for paths made an ``onyx-transform`` header past
    its 16 KB bound, the packet header refused it, and the root dead-lettered every message
    instead of forwarding it: hosts below received nothing."""
    from formats.header import MAX_TRANSFORM
    from routing.incremental import need, to_header
    from routing.table import Delta

    n = Node("b4", builtin("figure4"), bandwidth=1e4)
    for i in range(400):
        q = f"for $x in $msg/nitf/head/x{i}[@a = '{i}'] return <r>{{$x/y{i}}}</r>"
        n.collect("b1", "b6", Delta(f"q{i}", 1, n.query(q), need(q)))
    assert len(to_header(n.tables["b1"].projection("b6"))) > MAX_TRANSFORM
    xml = b"<nitf><head><x7 a='7'><y7>long text</y7></x7></head><body>more</body></nitf>"
    assert n.forwards("b1", xml) == [Forward("b6", None, None)]
