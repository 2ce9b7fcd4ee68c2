"""The fuzz targets: each takes one input's bytes and raises (an assertion, or an
exception the code under test must never let out) when the input shows a bug.

What each one holds the code to:

* :func:`profile` -- a profile text, as the registration service receives it. The
  XPath parser, the FLWR parser, :func:`yfilter.validate` and ``Engine.add`` on both
  runtimes either accept it or raise :class:`~yfilter.errors.ProfileError` with a
  column inside the text (never RecursionError, IndexError, ...); validate and add
  refuse exactly the same texts with the same error; an accepted profile matches a
  few fixed documents as lxml evaluates it, on both runtimes. ``validate`` (what the
  service runs per request) stays within the per-input CPU limit (:mod:`tests.fuzz.limit`).
* :func:`schema` -- a source's schema (DTD or XML Schema text), as ``POST /sources``
  receives it. Learning the source's dictionary from it (what the service runs per
  request) either succeeds or raises :class:`formats.FormatError`, within the per-input
  CPU limit; ``schema_names`` gives valid, distinct names, the dictionary's (or refuses
  the schema as it did); a DTD's declarations are read as the regular expressions
  :mod:`formats.dtd` replaced read them (on inputs small enough for those, whose cost
  was quadratic).
* :func:`message` -- XML text, as a publisher sends it. The engine (the C matcher
  reading lxml's tree, and the Python runtime) and ``formats.decode("text", ...)``
  refuse exactly what lxml's secure parser refuses (plus entity references, which
  messages may not use) and only with :class:`~yfilter.errors.MessageError` /
  :class:`formats.FormatError`; the C reader declines a tree (and hands the message
  to the column reader) only when the document has an internal DTD, where entity
  nodes come from; what is accepted matches every fixed profile as lxml says.
* :func:`payload` -- any wire format's payload. ``formats.decode`` raises only
  FormatError; what decodes is one well-formed element table, serializes (or
  FormatError), reads back as the same infoset, and is matched the same by the C
  matcher on its columns, the Python runtime, and both again on the XML it
  serializes to.
* :func:`header` -- Kafka record headers. ``PacketHeader.from_kafka`` raises only
  FormatError, and a header it reads survives ``to_kafka``/``from_kafka``.

An input is turned into its structured form by the target itself (documented on
each), so the committed corpus files stay readable where the input is text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lxml import etree

import formats
from bench.schema import before_declared
from formats import DictionaryStore, FormatError, PacketHeader, learn_dictionary, schema_names
from formats.dictionary import MAX_NAMES
from formats.dtd import attlist_bodies, attribute_names, element_names
from formats.message import MAX_MESSAGE_BYTES
from formats.names import check_name
from tests.formats.docgen import small_dictionary
from tests.formats.infoset import check_invariants, infoset
from tests.fuzz.limit import within_limit
from tests.yfilter.oracle import disagreements, lxml_matches
from yfilter import Engine, MessageError, ProfileError, flwr, parser, validate
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.parser import parse

T = TypeVar("T")

NAMESPACES = {"n": "urn:n"}
"""Prefixes profiles may use (besides ``xml``)."""

DOCUMENTS = (
    b'<nitf version="3"><head><title>Stocks</title><meta name="a" content="2"/></head>'
    b'<body><p>SF &amp; LA<em>up</em> 3%</p><p x="1" y="a">2</p><p/></body></nitf>',
    b'<a xmlns:n="urn:n" n:x="1" x="a b"><b>1<!--c-->2</b><n:b><c/>x<![CDATA[y]]></n:b>'
    b'<b xml:lang="fi"><c x="2">3</c><c>a</c></b></a>',
    b'<n:a xmlns:n="urn:n" xmlns="urn:n"><a><b x=" 1 "/></a><?pi x?><b>-1.5</b></n:a>',
)
"""Documents every accepted profile is matched against (mixed content, comments,
CDATA, namespaces, numbers as text and attributes)."""

FILTERS = {
    "path": "/nitf/head/title",
    "desc": "//p",
    "star": "/*/*[2]",
    "attr": "/nitf[@version = '3']",
    "num": "//meta[@content > 1]",
    "text": "//title[text() = 'Stocks']",
    "self": "//em[. = 'up']",
    "contains": "//p[contains(., 'SF')]",
    "starts": "//*[starts-with(@name, 'a')]",
    "bool": "/nitf[not(head/meta) or body/p[2]]",
    "nested": "/nitf[head/meta/@name = 'a']//p[em]",
    "pos": "//p[position() > 1][@x]",
    "tail": "//head/meta/@content",
    "ns": "//n:b[@n:x or c]",
    "lang": "//*[@xml:lang = 'fi']/c[2]",
    "value": "//b[. = '12']",
}
"""Filters every accepted message is matched against (lxml is their oracle)."""

TRANSFORMS = {
    "flwr": "for $n in $msg/nitf where $n/head/title return "
            "<r id='{$n/@version}'>{$n//meta/@name}{$n/body/p => drop('em')}</r>",
    "flwr-all": "for $x in $msg//* return <e>{$x/text()}</e>",
}
"""Transformation profiles whose results both runtimes must agree on."""


def _outcome(call: Callable[..., T], *args: object, allowed: type[Exception]) -> T | Exception:
    """What ``call(*args)`` returns, or the ``allowed`` error it raised (anything
    else propagates: that is the bug the fuzzer reports)."""
    try:
        return call(*args)
    except allowed as exc:
        return exc


def _engines(profiles: dict[str, str]) -> tuple[Engine, Engine]:
    """Engines on the native and the Python runtime holding ``profiles``."""
    out = (Engine(NAMESPACES), Engine(NAMESPACES, runtime="python"))
    for engine in out:
        engine.add_many(profiles)
    return out


# -- profiles ------------------------------------------------------------------------

def _parse(text: str) -> object:
    return parse_flwr(text, NAMESPACES) if is_flwr(text) else parse(text, NAMESPACES)


def _same_refusal(a: object, b: object) -> bool:
    if isinstance(a, ProfileError) and isinstance(b, ProfileError):
        return str(a) == str(b) and a.column == b.column
    return not isinstance(a, ProfileError) and not isinstance(b, ProfileError)


def _xpath_of(text: str) -> str:
    """The XPath lxml evaluates for a filter, or for a FLWR profile's for/where."""
    return str(parse_flwr(text, NAMESPACES).filter_path()) if is_flwr(text) else text


def _forget_parses() -> None:
    """Empty the parsers' caches of recent profiles (a timed run must parse)."""
    parser._parse_recent.cache_clear()
    flwr._parse_recent.cache_clear()


def profile(data: bytes) -> None:
    """A profile text: the input as UTF-8 (bytes that are not become lone
    surrogates, which a JSON body can carry too)."""
    text = data.decode("utf-8", "surrogateescape")
    valid = within_limit(lambda: _outcome(validate, text, NAMESPACES, allowed=ProfileError), reset=_forget_parses)
    parsed = _outcome(_parse, text, allowed=ProfileError)
    if isinstance(parsed, ProfileError):
        assert _same_refusal(parsed, valid), (parsed, valid)
    native, python = Engine(NAMESPACES), Engine(NAMESPACES, runtime="python")
    for engine in (native, python):
        added = _outcome(engine.add, "p", text, allowed=ProfileError)
        assert _same_refusal(added, valid), (engine.runtime, added, valid)
    if isinstance(valid, ProfileError):
        column = valid.column
        assert column is None or 1 <= column <= len(text) + 1, (column, len(text))
        return
    xpath = _xpath_of(text).strip()
    for doc in DOCUMENTS:
        got = native.match(doc)
        assert got == python.match(doc), (doc, got)
        try:
            expected = lxml_matches({"p": xpath}, doc, NAMESPACES)
        except (etree.XPathError, ValueError):  # what lxml cannot evaluate has no oracle
            expected = got
        assert got == expected, (doc, got)
        assert native.run(doc) == python.run(doc), doc
    native.remove("p")
    assert native.match(DOCUMENTS[0]) == frozenset()


# -- messages as XML text ------------------------------------------------------------

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
"""lxml's secure parser, configured here on its own: the verdict engines are held to."""

_FILTER_ENGINES = _engines(FILTERS)
_TRANSFORM_ENGINES = _engines(TRANSFORMS)


def _lxml_verdict(data: bytes) -> etree._Element | None:
    """The tree lxml's secure parser reads, or None when it refuses the text or the
    document uses an entity reference (messages are untrusted: no entities)."""
    if len(data) > MAX_MESSAGE_BYTES:
        return None
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError:
        return None
    if any(True for _ in root.iter(etree.Entity)):
        return None
    return root


def message(data: bytes) -> None:
    """A message: the input as XML text."""
    root = _lxml_verdict(data)
    native, python = _FILTER_ENGINES
    for engine in (native, python, *_TRANSFORM_ENGINES):
        got = _outcome(engine.match, data, allowed=MessageError)
        assert isinstance(got, MessageError) == (root is None), (engine.runtime, got)
    decoded = _outcome(formats.decode, "text", data, allowed=FormatError)
    assert isinstance(decoded, FormatError) == (root is None), decoded
    if root is None:
        return
    # The C reader on lxml's tree: it declines only nodes it does not model, which
    # only a document type declaration can bring (entity references).
    if native._native.match(root) is None:
        assert root.getroottree().docinfo.internalDTD is not None
    assert disagreements(native, FILTERS, data, NAMESPACES) == []
    native, python = _TRANSFORM_ENGINES
    assert native.run(data) == python.run(data)
    assert native.run(decoded) == python.run(decoded)


# -- payloads of every wire format ---------------------------------------------------

FORMATS = formats.available()
DICTIONARY = small_dictionary()


def payload(data: bytes) -> None:
    """A payload: the first byte picks the format (``formats.available()``, modulo
    their number); if the second byte is odd, the rest is packed in the format's
    compression layer first (so that mutations reach the base decoder through a
    valid checksum); the rest is the payload."""
    if len(data) < 2:
        return
    name = FORMATS[data[0] % len(FORMATS)]
    body = data[2:]
    fmt = formats.get(name)
    if data[1] & 1 and fmt.compression is not None:
        body = fmt.pack(body, DICTIONARY)
    msg = _outcome(formats.decode, name, body, allowed=FormatError)
    if isinstance(msg, FormatError):
        return
    check_invariants(msg)
    native, python = _FILTER_ENGINES
    got = _outcome(native.match, msg, allowed=MessageError)
    expected = _outcome(python.match, msg, allowed=MessageError)
    assert got == expected or isinstance(got, MessageError) and isinstance(expected, MessageError), (
        got, expected)
    xml = _outcome(msg.to_xml, allowed=FormatError)
    if isinstance(xml, FormatError):
        return
    again = formats.decode("text", xml)
    assert infoset(again) == infoset(msg)
    assert native.match(xml) == python.match(xml) == native.match(again)
    if not isinstance(got, MessageError):
        assert native.match(xml) == got


# -- packet headers ------------------------------------------------------------------

_STORE = DictionaryStore([DICTIONARY])


def _headers(data: bytes) -> list[tuple[object, object]]:
    """Kafka headers from lines ``key=value`` (no ``=``: no value). A line's first
    byte may say how the pair arrives instead of ``(str, bytes)``: 0x01 the key as
    bytes (Spark's rows), 0x02 the value as a bytearray, 0x03 as a memoryview,
    0x04 as a str, 0x05 the key as an int (neither str nor bytes)."""
    out: list[tuple[object, object]] = []
    for line in data.split(b"\n"):
        mode = line[0] if line and line[0] <= 5 else 0
        if mode:
            line = line[1:]
        raw_key, sep, raw_value = line.partition(b"=")
        key: object = raw_key if mode == 1 else len(raw_key) if mode == 5 else raw_key.decode("utf-8", "replace")
        value: object = raw_value if sep else None
        if sep and mode == 2:
            value = bytearray(raw_value)
        elif sep and mode == 3:
            value = memoryview(raw_value)
        elif sep and mode == 4:
            value = raw_value.decode("utf-8", "replace")
        out.append((key, value))
    return out


def header(data: bytes) -> None:
    """Kafka record headers (see :func:`_headers` for how the input spells them)."""
    read = _outcome(PacketHeader.from_kafka, _headers(data), allowed=FormatError)
    if isinstance(read, FormatError):
        return
    kafka = read.to_kafka()
    assert all(type(k) is str and type(v) is bytes for k, v in kafka)
    assert PacketHeader.from_kafka(kafka) == read
    assert PacketHeader(**vars(read)) == read
    _outcome(read.dictionary, _STORE, allowed=FormatError)


# -- schemas of sources ---------------------------------------------------------------

BEFORE_MAX = 1024
"""Inputs up to this size are also read with the old expressions (slow beyond)."""


def schema(data: bytes) -> None:
    """A schema: the input as UTF-8 (bytes that are not become lone surrogates, which a
    JSON body can carry too)."""
    text = data.decode("utf-8", "surrogateescape")
    learned = within_limit(lambda: _outcome(
        lambda: learn_dictionary("s", [], schema=text, train_zstd=False), allowed=FormatError))
    names = _outcome(schema_names, text, allowed=FormatError)
    if isinstance(names, FormatError):
        assert isinstance(learned, FormatError), learned
    else:
        assert all(check_name(name) for name in names) and len(set(names)) == len(names), names
        if len(names) <= MAX_NAMES:
            assert not isinstance(learned, FormatError) and learned.names == tuple(names), learned
    if len(data) <= BEFORE_MAX:
        read = element_names(data), [attribute_names(body) for body in attlist_bodies(data)]
        assert read == before_declared(data), read


TARGETS: dict[str, Callable[[bytes], None]] = {
    "profile": profile,
    "message": message,
    "payload": payload,
    "header": header,
    "schema": schema,
}
"""Every fuzz target by name (the name of its corpus folder)."""
