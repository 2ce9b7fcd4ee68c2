"""The starter inputs of each target's corpus (``python -m tests.fuzz --write-seeds``
writes them as ``seed-*`` files): valid inputs that reach deep into the code under
test, from which libFuzzer's mutations start. Inputs a fuzzing run adds, and the
ones that once crashed, sit next to them in the corpus folder."""

from __future__ import annotations

import formats
from formats import Message
from tests.fuzz import targets

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
    }
