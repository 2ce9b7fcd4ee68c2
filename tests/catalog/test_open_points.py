"""What the paper leaves open, decided (see catalog/backbone.py, shipping.py, gc.py): cycles of
strong references, stale copies of strongly referenced resources, the initial load of a new rule,
unsubscribe, batching, and deltas as messages (what a Kafka topic would carry)."""

from __future__ import annotations

import pytest

from catalog import Backbone, Delta, LocalRepository, RuleError, SubscriptionError
from catalog.document import FIGURE_1
from catalog.schema import FIGURE_1_SCHEMA

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RING_SCHEMA = f"""<rdf:RDF xmlns:rdf="{RDF}" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"
  xmlns:mdv="urn:onyx:mdv#" xml:base="urn:onyx:ring">
  <rdfs:Class rdf:ID="Node"/>
  <rdf:Property rdf:ID="name"><rdfs:domain rdf:resource="#Node"/></rdf:Property>
  <rdf:Property rdf:ID="next"><rdfs:domain rdf:resource="#Node"/><rdfs:range rdf:resource="#Node"/>
    <mdv:reference>strong</mdv:reference></rdf:Property>
</rdf:RDF>"""


def ring(*nodes: tuple[str, str, str]) -> str:
    body = "".join(f'<Node rdf:ID="{i}"><name>{n}</name><next rdf:resource="{nxt}"/></Node>' for i, n, nxt in nodes)
    return f'<rdf:RDF xmlns:rdf="{RDF}" xmlns="urn:onyx:ring#">{body}</rdf:RDF>'


@pytest.fixture
def figure1():
    mdp = Backbone()
    mdp.register_schema(FIGURE_1_SCHEMA)
    return mdp, LocalRepository("lmr-1", backbone=mdp)


def test_a_cycle_of_strong_references_is_collected_when_nothing_else_holds_it():
    mdp = Backbone()
    mdp.register_schema(RING_SCHEMA)
    lmr = LocalRepository("lmr-1", backbone=mdp)
    lmr.subscribe("search Node n register n where n.name = 'head'")
    # head -> a -> b -> a: a and b hold each other once head lets go
    mdp.register_document("r.rdf", ring(("h", "head", "#a"), ("a", "A", "#b"), ("b", "B", "#a")))
    assert sorted(lmr.resources()) == ["r.rdf#a", "r.rdf#b", "r.rdf#h"]
    mdp.register_document("r.rdf", ring(("h", "tail", "#a"), ("a", "A", "#b"), ("b", "B", "#a")))
    assert lmr.resources() == {}


def test_a_cycle_still_reached_from_a_match_stays():
    mdp = Backbone()
    mdp.register_schema(RING_SCHEMA)
    lmr = LocalRepository("lmr-1", backbone=mdp)
    lmr.subscribe("search Node n register n where n.name = 'A'")
    lmr.subscribe("search Node n register n where n.name = 'head'")
    mdp.register_document("r.rdf", ring(("h", "head", "#a"), ("a", "A", "#b"), ("b", "B", "#a")))
    mdp.register_document("r.rdf", ring(("h", "tail", "#a"), ("a", "A", "#b"), ("b", "B", "#a")))
    assert sorted(lmr.resources()) == ["r.rdf#a", "r.rdf#b"]


def test_a_strongly_referenced_copy_is_refreshed_though_no_rule_tests_it(figure1):
    mdp, lmr = figure1
    lmr.subscribe("search CycleProvider c register c where c.serverHost contains 'passau'")
    mdp.register_document("doc.rdf", FIGURE_1)
    assert lmr.resources()["doc.rdf#info"]["memory"] == ["92"]
    mdp.register_document("doc.rdf", FIGURE_1.replace('memory="92"', 'memory="512"'))
    assert lmr.resources()["doc.rdf#info"]["memory"] == ["512"]


def test_a_strongly_referenced_resource_in_another_document_follows_its_document(figure1):
    mdp, lmr = figure1
    lmr.subscribe("search CycleProvider c register c where c.serverPort = 5874")
    host = FIGURE_1.replace('<ServerInformation rdf:ID="info" memory="92" cpu="600" />', "") \
        .replace("<serverInformation>", '<serverInformation rdf:resource="info.rdf#info">') \
        .replace("<serverInformation rdf:resource=\"info.rdf#info\">\n    \n  </serverInformation>",
                 '<serverInformation rdf:resource="info.rdf#info"/>')
    mdp.register_document("doc.rdf", host)
    assert sorted(lmr.resources()) == ["doc.rdf#host"]                 # a dangling reference, so far
    info = (f'<rdf:RDF xmlns:rdf="{RDF}" xmlns="urn:onyx:objectglobe#">'
            '<ServerInformation rdf:ID="info" memory="64" cpu="1"/></rdf:RDF>')
    mdp.register_document("info.rdf", info)
    assert sorted(lmr.resources()) == ["doc.rdf#host", "info.rdf#info"]
    mdp.delete_document("info.rdf")
    assert sorted(lmr.resources()) == ["doc.rdf#host"]


def test_initial_load_and_rules_over_rules(figure1):
    mdp, lmr = figure1
    mdp.register_document("doc.rdf", FIGURE_1)
    base = lmr.subscribe("search CycleProvider c register c where c.serverPort > 1000")
    other = LocalRepository("lmr-2", backbone=mdp)
    narrow = other.subscribe(f"search rule({base}) r register r where r.serverInformation.cpu >= 600")
    assert sorted(other.resources()) == ["doc.rdf#host", "doc.rdf#info"]   # loaded at once
    lmr.unsubscribe(base)
    assert lmr.resources() == {}
    assert sorted(other.resources()) == ["doc.rdf#host", "doc.rdf#info"]   # its atomic rules live on
    mdp.register_document("doc.rdf", FIGURE_1.replace("5874", "80"))
    assert other.resources() == {}
    with pytest.raises(RuleError, match=f"no subscription rule {base}"):
        other.subscribe(f"search rule({base}) r register r")
    other.unsubscribe(narrow)
    assert mdp.atomic_rules() == []


def test_unsubscribe_errors(figure1):
    mdp, lmr = figure1
    sub = lmr.subscribe("search CycleProvider c register c")
    other = LocalRepository("lmr-2", backbone=mdp)
    with pytest.raises(SubscriptionError):
        other.unsubscribe(sub)
    with pytest.raises(SubscriptionError):
        LocalRepository("lmr-1", backbone=mdp)
    lmr.unsubscribe(sub)
    with pytest.raises(SubscriptionError):
        lmr.unsubscribe(sub)


def test_batches_close_by_size_or_period_and_coalesce_changes():
    mdp = Backbone(batch_size=3)
    mdp.register_schema(FIGURE_1_SCHEMA)
    lmr = LocalRepository("lmr-1", backbone=mdp)
    lmr.subscribe("search CycleProvider c register c")
    mdp.register_document("a.rdf", FIGURE_1)
    mdp.register_document("b.rdf", FIGURE_1)
    assert lmr.resources() == {}                                         # the batch is not full
    mdp.delete_document("b.rdf")                                         # registered and deleted: nothing
    assert lmr.resources() == {}
    mdp.register_document("c.rdf", FIGURE_1)                             # the third document closes it
    assert sorted(lmr.resources()) == ["a.rdf#host", "a.rdf#info", "c.rdf#host", "c.rdf#info"]
    assert mdp.rows("Documents") == [("a.rdf",), ("c.rdf",)]
    timed = Backbone(batch_size=100, batch_period=0.0)
    timed.register_schema(FIGURE_1_SCHEMA)
    watcher = LocalRepository("lmr-t", backbone=timed)
    watcher.subscribe("search CycleProvider c register c")
    timed.register_document("a.rdf", FIGURE_1)                           # its period is over at once
    assert sorted(watcher.resources()) == ["a.rdf#host", "a.rdf#info"]
    assert timed.flush_due() is None


def test_deltas_as_json_keep_a_remote_repository_equal(figure1):
    mdp, lmr = figure1
    remote = LocalRepository("remote")                                   # no backbone: fed by messages
    wire: list[str] = []
    mdp.connect("relay", lambda delta: wire.append(delta.to_json()))
    mdp.subscribe("relay", "search CycleProvider c register c where c.serverInformation.memory > 64")
    lmr.subscribe("search CycleProvider c register c where c.serverInformation.memory > 64")
    for memory in ("92", "32", "128"):
        mdp.register_document("doc.rdf", FIGURE_1.replace('memory="92"', f'memory="{memory}"'))
    mdp.register_document("other.rdf", FIGURE_1)
    mdp.delete_document("doc.rdf")
    for message in wire:
        remote.apply(Delta.from_json(message))
        remote.apply(Delta.from_json(message))                            # at-least-once: read twice
    assert remote.resources() == lmr.resources() and sorted(remote.resources()) == ["other.rdf#host", "other.rdf#info"]
    assert remote.query("search CycleProvider c register c") == {"other.rdf#host"}
