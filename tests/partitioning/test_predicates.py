"""Required equalities of real profile texts, checked against lxml on real matches."""

import pytest
from lxml import etree

from broker import config
from partitioning.predicates import Equality, Pattern, canonical, equalities
from routing.workload import load_corpus
from yfilter import Engine, ProfileError
from yfilter.generators import DocGenerator, ProfileGenerator, Schema


def _strs(text, ns=None):
    return [str(e) for e in equalities(text, ns)]


@pytest.mark.parametrize("text, want", [
    ("/nitf[head/pubdata/@edition.area = 'SF']", ["/nitf/head/pubdata/@edition.area = 'SF'"]),
    ("/nitf/head/pubdata[@edition.area = 'SF']", ["/nitf/head/pubdata/@edition.area = 'SF'"]),
    ("$msg//hl1[text() = 'x']", ["//hl1/text() = 'x'"]),
    ("/a/b[. = 'x']", ["/a/b = 'x'"]),
    ("/a[b = 'x']", ["/a/b = 'x'"]),
    ("/a['x' = @k]", ["/a/@k = 'x'"]),
    ("/a[@k = 'x' and @j = 3]", ["/a/@k = 'x'", "/a/@j = 3"]),
    ("/a[@k = 'x' or @j = 3]", []),
    ("/a[not(@k = 'x')]", []),
    ("/a[@k != 'x'][@j > 2][contains(@m, 'x')]", []),
    ("/a[b[@k = '1']/c/@j = '2']", ["/a/b/c/@j = 2", "/a/b/@k = 1"]),
    ("/a[.//b[@k = 'v']]", ["/a//b/@k = 'v'"]),
    ("/*/b[@k = 'v'][2]", ["/*/b/@k = 'v'"]),
    ("/a[@k = 'v'][@k = 'v']", ["/a/@k = 'v'"]),
])
def test_required_equalities(text, want):
    assert sorted(_strs(text)) == sorted(want)


def test_values_are_canonical_so_numeric_and_string_forms_share_a_bucket_key():
    assert equalities("/a[@v = 5]") == equalities("/a[@v = '5.0']") == equalities("/a[@v = ' 5']")
    assert equalities("/a[@v = 'SF']")[0].value == "SF" and canonical("x1") == "x1"


def test_namespaced_names_are_clark_names():
    eqs = equalities("/n:a[n:b/@x:k = 'v']", {"n": "urn:n", "x": "urn:x"})
    assert eqs == (Equality(Pattern("/{urn:n}a/{urn:n}b", "@{urn:x}k"), "v"),)


def test_a_bad_profile_is_the_parsers_error():
    with pytest.raises(ProfileError):
        equalities("/a[")


def _values(doc, pattern):
    """What lxml finds at the pattern's skeleton in ``doc`` (namespace-free schemas)."""
    path = pattern.path + ("" if pattern.target == "." else "/" + pattern.target)
    found = doc.xpath(path)
    if pattern.target == ".":
        found = [e.xpath("string(.)") for e in found]
    return [str(v) for v in found]


def _required_holds(eq, doc):
    want = eq.value
    for v in _values(doc, eq.pattern):
        if (canonical(v) == want) if isinstance(want, float) else v == want:
            return True
    return False


@pytest.mark.parametrize("source", ["nitf", "corpus"])
def test_every_matching_message_satisfies_every_extracted_equality(source):
    """Differential: each profile the engine says matches a message must see, in that
    message, every value its extracted equalities require (found with lxml)."""
    if source == "nitf":
        schema, docs = Schema.nitf(), [DocGenerator(Schema.nitf(), seed=i).generate() for i in range(40)]
    else:
        if not config.CORPUS_DIR.is_dir():
            pytest.skip("no news corpus")
        docs, schema = load_corpus(config.CORPUS_DIR)
    # Small schemas and a low P(*), P(//) so that generated profiles match often.
    gen = ProfileGenerator(schema, depth=4, p_star=0.05, p_desc=0.05, n_preds=(1, 2), n_nested=1, seed=7,
                           distinct=False)
    engine = Engine(dict(schema.namespaces))
    texts = {f"q{i}": gen.generate() for i in range(600)}
    for pid, text in texts.items():
        engine.add(pid, text)
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    checked = 0
    for raw in docs:
        doc = etree.fromstring(raw, parser)
        if schema.namespaces:  # the lxml check below reads unprefixed names only
            continue
        for pid in engine.match(raw):
            for eq in equalities(texts[pid], schema.namespaces):
                assert _required_holds(eq, doc), (texts[pid], str(eq))
                checked += 1
    assert checked > 50
