"""The starter inputs of each target's corpus (``python -m tests.fuzz --write-seeds``
writes them as ``seed-*`` files): valid inputs that reach deep into the code under
test, from which libFuzzer's mutations start. Inputs a fuzzing run adds, and the
ones that once crashed, sit next to them in the corpus folder."""

from __future__ import annotations

import formats
from bench.schema import ADVERSARIAL, ADVERSARIAL_XSD, render_dtd, render_xsd
from formats import Message
from tests.fuzz import targets
from yfilter.generators.schema import Schema

PROFILES = [
    *targets.FILTERS.values(),
    *targets.TRANSFORMS.values(),
    "$msg/nitf/head/pubdata[@edition.area = 'SF']",
    "/a[b[c[@x != 1] and not(d)] or (e and f)]/text()",
    "//*[@n:x <= -2.5][contains(text(), \"it's\")]/@xml:lang",
    "/n:a/descendant::b[position() = last()]",
    "for $x in $msg//b where $x/@x = 'a' or contains($x, 'b') return "
    "<out a=\"{$x/@x} {$x/c}\">t&amp;{$x => rename('b', 'c') => drop('comment()')}<in/>{$x/text()}</out>",
]
"""Profiles using every construct of the language (and a few it refuses)."""

MESSAGES = [
    *targets.DOCUMENTS,
    b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<a>caf\xe9<b x="&#9;&#x41;&lt;"/></a>',
    b'<!DOCTYPE a [<!ENTITY e "SF"><!ATTLIST a x CDATA "d">]><a y="&e;"><b/></a>',
    b"<!DOCTYPE a [<!ENTITY e 'x'>]><a>&e;</a>",
    b"<a>" * 40 + b"x" + b"</a>" * 40,
]
"""Documents with declarations, DTDs, entities, character references and nesting."""

HEADERS = [
    b"onyx-flow=xml\nonyx-format=stream-dict+zstd-dict\nonyx-source=gen\nonyx-dictionary-version=1\n"
    b"onyx-root-broker=b1\nonyx-message-id=gen:42\nonyx-schema-version=NITF 3.6\nonyx-transform=projected",
    b"\x01onyx-flow=control\n\x02onyx-message-id=m\ntraceparent=00-ab",
    b"onyx-flow=xml\n\x03onyx-format=text\n\x04onyx-source=s\n\x05x=1\nonyx-root-broker",
]
"""Header lists in :func:`tests.fuzz.targets._headers`' spelling."""


SCHEMA_TEXTS = [
    b"""<!ENTITY % common "id ID #IMPLIED">
<!ELEMENT nitf (head?, body)>
<!ATTLIST nitf version CDATA #FIXED "-//IPTC//DTD NITF 3.6//EN" xml:lang NMTOKEN #IMPLIED %common;>
<!ELEMENT head (title?)> <!ELEMENT title (#PCDATA)>
<!ATTLIST title type (main|subtitle) 'main' x:odd CDATA #IMPLIED>""",
    b"""<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="urn:t"
    elementFormDefault="qualified" attributeFormDefault="unqualified">
  <xs:element name="item"><xs:complexType><xs:sequence>
    <xs:element name="title"/><xs:element ref="item"/><xs:element name="local" form="unqualified"/>
  </xs:sequence><xs:attribute name="guid"/><xs:attribute name="q" form="qualified"/></xs:complexType></xs:element>
  <xs:attribute name="global"/>
</xs:schema>""",
]
"""Hand-written schemas: parameter entities, xml:lang, prefixes, forms, references."""


def schemas() -> dict[str, bytes]:
    """Valid DTDs and XML Schemas (a few elements of the NITF-like schema, as
    ``bench.schema`` renders them), hand-written ones, and each adversarial DTD and XML
    Schema of ``bench.schema`` at 1.5 KB (the DTDs made the old expressions backtrack)."""
    nitf = Schema.nitf()
    few = Schema(nitf.root, dict(list(nitf.elements.items())[:10]))
    out = {f"text-{i}": text for i, text in enumerate(SCHEMA_TEXTS)}
    out |= {"dtd": render_dtd(few), "xsd": render_xsd(few), "xsd-target": render_xsd(few, target="urn:onyx:t")}
    out |= {f"adversarial-{i}": make(1500) for i, make in enumerate(ADVERSARIAL.values())}
    out |= {f"adversarial-xsd-{i}": make(1500) for i, make in enumerate(ADVERSARIAL_XSD.values())}
    return out


def payloads() -> dict[str, bytes]:
    """Every document in every format, and base-format payloads behind a valid
    compression layer (see :func:`tests.fuzz.targets.payload`)."""
    out = {}
    for i, name in enumerate(targets.FORMATS):
        fmt = formats.get(name)
        for k, xml in enumerate(targets.DOCUMENTS):
            out[f"{name}-{k}"] = bytes([i, 0]) + formats.encode(name, xml, dictionary=targets.DICTIONARY)
            if fmt.compression is not None and k == 0:
                raw = fmt.base.encode(Message.from_xml(xml), targets.DICTIONARY)
                out[f"{name}-{k}-packed"] = bytes([i, 1]) + raw
    return out


def starter_inputs() -> dict[str, dict[str, bytes]]:
    """Starter inputs by target, each by a short name."""
    return {
        "profile": {str(i): p.encode("utf-8") for i, p in enumerate(PROFILES)},
        "message": {str(i): m for i, m in enumerate(MESSAGES)},
        "payload": payloads(),
        "header": {str(i): h for i, h in enumerate(HEADERS)},
        "schema": schemas(),
    }
