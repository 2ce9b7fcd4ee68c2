"""The rule language: what it accepts, how it normalizes and decomposes, and errors that say
where and what (section 2.3)."""

from __future__ import annotations

import pytest

from catalog import Backbone, CatalogError, DocumentError, LocalRepository, RuleError, SchemaError
from catalog.document import FIGURE_1, parse_document
from catalog.normalize import normalize
from catalog.parser import parse
from catalog.schema import FIGURE_1_SCHEMA, Schema

SET_SCHEMA = """<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
  xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:mdv="urn:onyx:mdv#" xml:base="urn:onyx:objectglobe">
  <rdfs:Class rdf:ID="Cluster"/>
  <rdf:Property rdf:ID="nodes"><rdfs:domain rdf:resource="#Cluster"/><rdfs:range rdf:resource="#ServerInformation"/>
    <mdv:reference>strong</mdv:reference><mdv:setValued>true</mdv:setValued></rdf:Property>
  <rdf:Property rdf:ID="tags"><rdfs:domain rdf:resource="#Cluster"/><mdv:setValued>true</mdv:setValued></rdf:Property>
</rdf:RDF>"""


@pytest.fixture
def schema():
    s = Schema()
    s.add(FIGURE_1_SCHEMA)
    s.add(SET_SCHEMA)
    return s


@pytest.mark.parametrize("text, position, construct", [
    ("search CycleProvider c register", 31, "register clause"),
    ("search Provider c register c", 7, "class"),
    ("search CycleProvider c register d", 32, "register clause"),
    ("search CycleProvider c register c where c.port = 1", 42, "property"),
    ("search CycleProvider c register c where c.serverHost > 'a'", 55, "comparison"),
    ("search CycleProvider c register c where c.serverHost.x = 1", 53, "path"),
    ("search CycleProvider c register c where d.serverHost = 1", 40, "variable"),
    ("search CycleProvider c register c where 1 = 2", 40, "comparison"),
    ("search CycleProvider c register c where c.serverInformation > 3", 40, "comparison"),
    ("search Cluster k register k where k.tags = 'x'", 36, "property"),
    ("search CycleProvider c register c where c.serverHost? = 'x'", 42, "any operator"),
    ("search CycleProvider c, ServerInformation s register c where c = s", 61, "comparison"),
    ("search CycleProvider c register c where c.serverHost = 'open", 55, "string"),
    ("search CycleProvider c register c where c.serverHost == 'x'", 54, "operand"),
    ("search rule(99) r register r", 7, "extension"),
    ("search CycleProvider c, CycleProvider c register c", 24, "variable"),
])
def test_bad_rules_name_position_and_construct(schema, text, position, construct):
    with pytest.raises(RuleError) as err:
        normalize(parse(text), schema)
    assert (err.value.position, err.value.construct) == (position, construct), str(err.value)
    assert isinstance(err.value, CatalogError) and isinstance(err.value, ValueError)


def test_or_splits_into_several_rules(schema):
    rules = normalize(parse("search CycleProvider c register c where (c.serverPort = 1 or c.serverPort = 2) "
                            "and (c.serverHost contains 'a' or c.serverHost contains 'b')"), schema)
    assert [str(r).split(" where ")[1] for r in rules] == [
        "c.serverPort = 1 and c.serverHost contains 'a'", "c.serverPort = 1 and c.serverHost contains 'b'",
        "c.serverPort = 2 and c.serverHost contains 'a'", "c.serverPort = 2 and c.serverHost contains 'b'"]


def test_any_paths_do_not_share_their_element_single_valued_prefixes_do(schema):
    [n] = normalize(parse("search Cluster k register k where k.nodes?.memory > 64 and k.nodes?.cpu > 500"), schema)
    assert str(n) == ("search Cluster k, ServerInformation s, ServerInformation s2 register k where "
                      "k.nodes = s and s.memory > 64 and k.nodes = s2 and s2.cpu > 500")
    [n] = normalize(parse("search CycleProvider c register c where c.serverInformation.memory > 64 "
                          "and c.serverInformation.cpu > 500"), schema)
    assert str(n).count("ServerInformation") == 1


def test_rules_the_decomposition_cannot_express_are_refused_whole():
    mdp = Backbone()
    mdp.register_schema(FIGURE_1_SCHEMA)
    lmr = LocalRepository("l", backbone=mdp)
    for text, construct in [
        ("search CycleProvider c, CycleProvider d register c where c.serverHost = d.serverHost "
         "and c.serverPort = d.serverPort", "comparison"),                       # a cycle
        ("search CycleProvider c register c where c.serverHost = c.serverPort", "comparison"),
        ("search CycleProvider c, ServerInformation s register c where c.serverPort > 1", "variable"),
    ]:
        with pytest.raises(RuleError) as err:
            lmr.subscribe(text)
        assert err.value.construct == construct
        assert mdp.atomic_rules() == [] and lmr.subscriptions() == {}
    # a local query is not decomposed: the same comparisons go there
    assert lmr.query("search CycleProvider c register c where c.serverHost = c.serverPort") == set()


def test_rules_share_atomic_rules_and_form_groups_section_333():
    mdp = Backbone()
    mdp.register_schema(FIGURE_1_SCHEMA)
    lmr = LocalRepository("l", backbone=mdp)
    lmr.subscribe("search CycleProvider c register c where c.serverInformation.memory > 64")
    lmr.subscribe("search CycleProvider x register x where x.serverInformation.cpu > 500")
    texts = [t for _, t, _ in mdp.atomic_rules()]
    assert texts.count("search CycleProvider c register c") == 1         # RuleA, shared
    joins = [(r, g) for r, t, g in mdp.atomic_rules() if g is not None]
    assert len(joins) == 2 and len({g for _, g in joins}) == 1            # RuleC1, RuleC2: one group
    again = lmr.subscribe("search CycleProvider q register q where q.serverInformation.memory > 64.0")
    assert len(mdp.atomic_rules()) == 5                                   # equal rules: nothing new
    lmr.unsubscribe(again)
    assert len(mdp.atomic_rules()) == 5


def test_schema_and_document_errors():
    s = Schema()
    with pytest.raises(SchemaError):
        s.add("<not-rdf")
    with pytest.raises(SchemaError, match="mdv:reference"):
        s.add(FIGURE_1_SCHEMA.replace("<mdv:reference>strong", "<mdv:reference>firm"))
    s.add(FIGURE_1_SCHEMA)
    with pytest.raises(SchemaError, match="another definition"):
        s.add(FIGURE_1_SCHEMA.replace("<mdv:reference>strong", "<mdv:reference>weak"))
    for bad, match in [(FIGURE_1.replace("serverPort", "port"), "no property port"),
                       (FIGURE_1.replace('rdf:ID="info" ', ""), "without rdf:ID"),
                       (FIGURE_1.replace("<serverPort>5874</serverPort>",
                                         "<serverPort>1</serverPort><serverPort>2</serverPort>"), "single-valued"),
                       ('<!DOCTYPE x [<!ENTITY a "b">]>' + FIGURE_1, "DTD"),
                       (FIGURE_1.replace('rdf:ID="host"', 'rdf:about="other.rdf#host"'), "not a resource of")]:
        with pytest.raises(DocumentError, match=match):
            parse_document("doc.rdf", bad, s)
    mdp = Backbone()
    with pytest.raises(DocumentError):
        mdp.delete_document("nothing.rdf")


def test_document_uris_relative_absolute_and_urns():
    s = Schema()
    s.add(FIGURE_1_SCHEMA)
    for doc in ("doc.rdf", "dir/doc.rdf", "http://example.org/doc.rdf", "urn:onyx:doc:1"):
        res = parse_document(doc, FIGURE_1, s)
        assert sorted(res) == [f"{doc}#host", f"{doc}#info"]
        assert res[f"{doc}#host"].props["serverInformation"] == (f"{doc}#info",)
