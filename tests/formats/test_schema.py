"""Reading a source's schema: :mod:`formats.dtd` reads exactly what the regular
expressions it replaced read (``bench.schema.before_declared``, kept there as the
benchmark's "before" row) -- on valid DTDs (generated, derived from the news corpus,
random) and on any text at all -- so no source's dictionary changes; and it reads the
texts those expressions backtracked on, up to the service's 1,000,000-character cap.
Speed itself is ``bench.schema``'s; here a hang fails the test (pytest-timeout)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from bench.schema import ADVERSARIAL, before_declared, before_schema_names, render_dtd, render_xsd
from formats import FormatError, learn_dictionary, schema_names
from formats.dtd import attlist_bodies, attribute_names, element_names
from formats.message import parse_xml
from yfilter.generators.schema import Schema

from .conftest import corpus_params
from .docgen import SETTINGS

pytestmark = pytest.mark.timeout(300)


def declared(data: bytes) -> tuple[list[bytes], list[list[bytes]]]:
    """What :mod:`formats.dtd` reads, in :func:`before_declared`'s shape."""
    return element_names(data), [attribute_names(body) for body in attlist_bodies(data)]


def assert_read_as_before(data: bytes) -> None:
    assert declared(data) == before_declared(data)
    assert schema_names(data) == before_schema_names(data)


EDGE_CASES = [
    b"<!ELEMENT a (b)><!ATTLIST a x CDATA '>' y ID #IMPLIED>",
    b"<!ATTLIST a x CDATA #FIXED\t\"a'b>\" y (p|q) 'q' z NOTATION(g) #REQUIRED>",
    b"<!ATTLIST a x ENTITIES #IMPLIED y ENTITY #IMPLIED z IDREFS #IMPLIED w IDREF #IMPLIED>",
    b"<!ATTLIST a x CDATA #IMPLIEDy CDATA #IMPLIED>",  # a definition right after a default
    b"<!ATTLIST a x CDATA 'v'y CDATA 'w'>",  # ... right after a literal: the quote is part of no name
    b"<!ATTLIST a x (a|b) #IMPLIED y (c CDATA #IMPLIED) #REQUIRED>",  # definitions inside an enumeration
    b"<!ATTLIST a x CDATA #FIXED y CDATA #IMPLIED>",  # #FIXED without a literal
    b"<!ATTLIST a x CDATAZ #IMPLIED y IDREFSS #IMPLIED z ENTITIESX #IMPLIED>",
    b"<!ATTLIST a\"b x CDATA #IMPLIED> c\" y CDATA #IMPLIED>",  # a quote in the name opens a literal
    b"<!ATTLIST 'a\"b' x CDATA #IMPLIED>\" y CDATA #IMPLIED '>",
    b"<!ATTLIST a x CDATA \"never closed> <!ATTLIST b y CDATA #IMPLIED>",
    b"<!ATTLIST a <!ATTLIST b x CDATA #IMPLIED>",  # a list inside a list's name
    b"<!-- <!ELEMENT commented (x)> <!ATTLIST commented c CDATA #IMPLIED> --><!ELEMENT a EMPTY>",
    b"<!ENTITY % e \"<!ELEMENT in-entity ANY>\"><!ATTLIST a %e; x CDATA #IMPLIED>",
    b"<!ELEMENT\n\tname.with-dots\n(a)><!ELEMENT(x)><!ELEMENT   >",
    b"<!ATTLIST a xml:lang NMTOKEN #IMPLIED n:x CDATA #IMPLIED \xc3\xa9t\xc3\xa9 CDATA #IMPLIED \xff CDATA #IMPLIED>",
    b"<!ATTLIST a x CDATA #IMPLIED",
    b"",
]


@pytest.mark.parametrize("data", EDGE_CASES)
def test_edge_cases_read_as_before(data: bytes) -> None:
    assert_read_as_before(b"<!ELEMENT a ANY>" + data)


@pytest.mark.parametrize("copies", [1, 4])
def test_generated_dtds_are_valid_and_read_as_before(copies: int) -> None:
    data = render_dtd(Schema.nitf(), copies)
    dtd = etree.DTD(io.BytesIO(data))  # valid: lxml reads it
    assert_read_as_before(data)
    names = schema_names(data)
    assert {el.name for el in dtd.iterelements()} <= set(names)
    assert "{http://www.w3.org/XML/1998/namespace}lang" in names and "onyx.image" in names


@pytest.mark.parametrize("path", corpus_params())
def test_dtds_of_the_corpus_documents_read_as_before(path) -> None:
    # Every element and attribute name a real document uses, declared in a DTD with
    # namespaces as prefixes (which the reader leaves out, before as now).
    data = render_dtd(Schema.from_documents([parse_xml(path.read_bytes())]))
    etree.DTD(io.BytesIO(data))
    assert_read_as_before(data)


@pytest.mark.parametrize("target", [None, "urn:onyx:t"])
def test_xml_schemas_read_as_before(target: str | None) -> None:
    data = render_xsd(Schema.nitf(), 2, target)
    etree.XMLSchema(etree.fromstring(data))
    names = schema_names(data)
    assert names == before_schema_names(data)
    assert ("{urn:onyx:t}nitf.1" if target else "nitf.1") in names and "change.date" in names


_TOKENS = st.sampled_from([
    b"<!ELEMENT", b"<!ATTLIST", b" ", b"\n", b"\t", b"a", b"b.c", b"'", b'"', b">", b"(", b")", b"|", b"%",
    b"#", b"CDATA", b"ID", b"IDREF", b"IDREFS", b"ENTITY", b"ENTITIES", b"NMTOKEN", b"NMTOKENS", b"NOTATION",
    b"#REQUIRED", b"#IMPLIED", b"#FIXED", b"xml:lang", b"<!--", b"-->", b"\xc3\xa9", b"\xff",
])


@settings(SETTINGS, max_examples=400)
@given(st.lists(_TOKENS | st.binary(max_size=2), max_size=60).map(b"".join))
def test_random_texts_read_as_before(data: bytes) -> None:
    assert declared(data) == before_declared(data)


_WS = st.sampled_from([" ", "\n", "\t", "  \n  "])
_NAME = st.sampled_from(["nitf", "p", "tobject.subject", "x-y", "_z", "été", "名前", "xml:lang", "n:p", "%pe;"])


@st.composite
def _literal(draw: st.DrawFn) -> str:
    quote = draw(st.sampled_from("\"'"))
    return quote + draw(st.text("ab >'\"#%()|<!ATTLIST", max_size=12)).replace(quote, "") + quote


@st.composite
def _attdef(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["CDATA", "ID", "IDREF", "IDREFS", "ENTITY", "ENTITIES", "NMTOKEN", "NMTOKENS",
                                 "(a|b)", "( a | b.c )", "NOTATION (gif | png)"]))
    default = draw(st.sampled_from(["#REQUIRED", "#IMPLIED"]) | _literal()
                   | _literal().map(lambda lit: "#FIXED " + lit))
    return draw(_NAME) + draw(_WS) + kind + draw(_WS) + default


@st.composite
def valid_dtds(draw: st.DrawFn) -> bytes:
    """DTDs of element and attribute-list declarations (names, every type and default,
    literals holding '>' and the other quote), comments, processing instructions and
    parameter entities."""
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        which = draw(st.sampled_from(["element", "attlist", "comment", "pi", "entity"]))
        if which == "element":
            model = draw(st.sampled_from(["EMPTY", "ANY", "(#PCDATA)", "(#PCDATA | a)*", "(a, b?)", "(a | (b, c))*"]))
            parts.append(f"<!ELEMENT{draw(_WS)}{draw(_NAME)}{draw(_WS)}{model}>")
        elif which == "attlist":
            defs = "".join(draw(_WS) + d for d in draw(st.lists(_attdef(), max_size=4)))
            parts.append(f"<!ATTLIST{draw(_WS)}{draw(_NAME)}{defs}{draw(st.sampled_from(['', ' ', chr(10)]))}>")
        elif which == "comment":
            parts.append("<!--" + draw(st.text("a '\">-<!ELEMENT", max_size=20)).replace("--", "") + "-->")
        elif which == "pi":
            parts.append("<?onyx " + draw(st.text("a '\">", max_size=10)) + "?>")
        else:
            parts.append(f"<!ENTITY % pe {draw(_literal())}>")
    return "\n".join(parts).encode("utf-8")


@settings(SETTINGS, max_examples=300)
@given(valid_dtds())
def test_random_valid_dtds_read_as_before(data: bytes) -> None:
    assert_read_as_before(b"<!ELEMENT a ANY>\n" + data)


@pytest.mark.parametrize("kind", ADVERSARIAL)
def test_adversarial_dtds_read_as_before(kind: str) -> None:
    assert_read_as_before(ADVERSARIAL[kind](3000))


@pytest.mark.parametrize("kind", ADVERSARIAL)
def test_a_megabyte_adversarial_dtd_is_read(kind: str) -> None:
    # The old expressions took hours on most of these (bench.schema measures both).
    learn_dictionary("s", [], schema=ADVERSARIAL[kind](1_000_000).decode("utf-8"), train_zstd=False)


def test_a_million_characters_of_attack_in_any_script_are_read() -> None:
    # The service caps a schema at 1,000,000 characters; in UTF-8 that may be 3 MB.
    assert schema_names("<!ELEMENT a ANY><!ATTLIST " + "é" * 1_000_000) == ["a"]
    assert schema_names("<!ELEMENT a ANY><!ATTLIST a" + " é CDATA 'x" * 90_000) == ["a"]


def test_a_lone_surrogate_is_a_format_error() -> None:
    # A JSON body's "\udcff" escape makes such a str; encoding it raised UnicodeEncodeError.
    with pytest.raises(FormatError, match="lone surrogate"):
        schema_names("<!ELEMENT a ANY><!ATTLIST a \udcff CDATA #IMPLIED>")
    with pytest.raises(FormatError, match="lone surrogate"):
        schema_names('<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><!--\ud800--></xs:schema>')
