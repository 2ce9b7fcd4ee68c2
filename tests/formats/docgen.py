"""Hypothesis strategies for XML documents that stress the wire formats: namespaced
and non-ASCII names, attributes, mixed content, characters XML must escape,
whitespace-only text, CDATA sections, comments and processing instructions; and the small learned
dictionary the formats tests and fuzz targets encode with."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from lxml import etree

import formats
from formats import FormatError
from formats.message import parse_xml

SETTINGS = settings(
    max_examples=60,
    deadline=None,  # shared CPUs: a slow example is not a failure
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Hypothesis settings for the formats tests (a decorator; never a global profile,
which would change other packages' tests)."""

NAMESPACES = ["http://iptc.org/std/nar/2006-10-01/", "urn:x-onyx:a", "urn:x-onyx:b"]
LOCAL_NAMES = ["nitf", "head", "body", "p", "hl1", "meta", "tobject.subject", "x-y", "_z", "été", "名前"]
ATTR_NAMES = ["id", "name", "content", "edition.area", "tobject.subject.type", "ä"]


def _xml_char(c: str) -> bool:
    o = ord(c)
    return c in "\t\n\r" or 0x20 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or o >= 0x10000


TEXT = st.one_of(
    st.just(""),
    st.sampled_from(["\n  ", " ", "SF", "Stock", "a & b < c > d \"q\" 'a'", "]]>", "\t\r\n"]),
    st.text(st.characters(blacklist_categories=("Cs",)).filter(_xml_char), max_size=12),
)

NAME = st.one_of(
    st.sampled_from(LOCAL_NAMES),
    st.builds(lambda ns, n: f"{{{ns}}}{n}", st.sampled_from(NAMESPACES), st.sampled_from(LOCAL_NAMES)),
)
ATTR = st.one_of(
    st.sampled_from(ATTR_NAMES),
    st.builds(lambda ns, n: f"{{{ns}}}{n}", st.sampled_from(NAMESPACES[1:]), st.sampled_from(ATTR_NAMES)),
    st.just("{http://www.w3.org/XML/1998/namespace}lang"),
)
NSMAP = st.dictionaries(
    st.sampled_from([None, "a", "b", "n"]), st.sampled_from(NAMESPACES), max_size=2
)


@st.composite
def elements(draw: st.DrawFn, depth: int = 0, max_depth: int = 5) -> etree._Element:
    """A random element subtree (lxml), decorated with CDATA, comments and PIs."""
    el = etree.Element(draw(NAME), nsmap=draw(NSMAP) or None)
    for name in draw(st.lists(ATTR, max_size=3, unique=True)):
        el.set(name, draw(TEXT))
    text = draw(TEXT)
    # Sometimes as a CDATA section (which the text of a Message no longer shows).
    el.text = etree.CDATA(text) if text and "]]>" not in text and draw(st.booleans()) else text
    if depth < max_depth:
        for _ in range(draw(st.integers(0, 4 if depth < 2 else 2))):
            kind = draw(st.sampled_from(["element", "element", "element", "comment", "pi"]))
            if kind == "element":
                child = draw(elements(depth + 1, max_depth))
            elif kind == "comment":
                child = etree.Comment(draw(st.sampled_from(["c", " note ", ""])))
            else:
                child = etree.ProcessingInstruction("onyx", draw(st.sampled_from(["", "x=1"])))
            child.tail = draw(TEXT)
            el.append(child)
    return el


@st.composite
def documents(draw: st.DrawFn, max_depth: int = 5) -> bytes:
    """A random XML document as bytes (sometimes with a declaration)."""
    root = draw(elements(0, max_depth))
    declaration = draw(st.booleans())
    xml = etree.tostring(root, encoding="utf-8", xml_declaration=declaration)
    # lxml can serialize a tree it built itself into XML it refuses to parse (an
    # invented prefix colliding with a redeclared one): only well-formed input counts.
    try:
        parse_xml(xml)
    except FormatError:
        assume(False)
    return xml


def small_dictionary() -> formats.Dictionary:
    """A dictionary learned from a fixed handful of small documents: most generated
    names are missing from it, which exercises the inline escape. Learning is
    deterministic, so its version and digest are the same in every process (the
    fuzz corpus holds ``stream-dict`` payloads encoded with it)."""
    sample = [
        b'<nitf version="3"><head><title>t%d</title><meta name="a" content="b"/></head>'
        b"<body><p>x</p></body></nitf>" % i
        for i in range(12)
    ]
    return formats.learn_dictionary("gen", sample)
