"""decode(encode(m)) is infoset-equal to m, for every format, on the news corpus and
on generated documents."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import formats
from formats import Message

from .conftest import corpus_params
from .docgen import SETTINGS, documents
from .infoset import check_invariants, infoset, table

FORMATS = formats.available()
STREAMS = [name for name in FORMATS if not name.startswith("text")]


def test_available_names_every_base_and_compression() -> None:
    for base in ("text", "stream", "stream-dict"):
        assert base in FORMATS
        for compression in ("zlib", "zstd", "zstd-dict"):
            assert f"{base}+{compression}" in FORMATS


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_file_round_trips_in_every_format(path, corpus_dictionary) -> None:
    xml = path.read_bytes()
    expected = infoset(xml)
    message = Message.from_xml(xml)
    for name in FORMATS:
        blob = formats.encode(name, xml, dictionary=corpus_dictionary)
        decoded = formats.decode(name, blob, dictionary=corpus_dictionary)
        check_invariants(decoded)
        assert infoset(decoded) == expected, name
        assert infoset(decoded.to_xml()) == expected, name
        if name in STREAMS:
            # Binary formats carry the table itself, namespace declarations included.
            assert table(decoded) == table(message), name
        assert formats.encode(name, message, dictionary=corpus_dictionary) is not None


@settings(SETTINGS, max_examples=120)
@given(documents())
def test_generated_documents_round_trip_in_every_format(small_dictionary, xml) -> None:
    expected = infoset(xml)
    message = Message.from_xml(xml)
    for name in FORMATS:
        for data in (xml, message):
            blob = formats.encode(name, data, dictionary=small_dictionary)
            decoded = formats.decode(name, blob, dictionary=small_dictionary)
            assert infoset(decoded) == expected, name
            if name in STREAMS:
                assert table(decoded) == table(message), name


def test_names_missing_from_the_dictionary_travel_inline(small_dictionary) -> None:
    xml = b'<nitf version="3"><unknown.element new-attr="v"><p>x</p></unknown.element></nitf>'
    blob = formats.encode("stream-dict", xml, dictionary=small_dictionary)
    assert b"unknown.element" in blob and b"new-attr" in blob
    assert b"nitf" not in blob and b"version" not in blob  # known names are codes
    assert formats.decode("stream-dict", blob, dictionary=small_dictionary).to_xml() == xml


@pytest.mark.parametrize(
    "xml",
    [
        b'<a xmlns="urn:u"><b xmlns=""><c/></b></a>',
        b'<a xmlns="urn:u" xmlns:p="urn:p"><p:b p:x="1" y="2"/><b xml:lang="fi"/></a>',
        b'<p:a xmlns:p="urn:u"><q:b xmlns:q="urn:v"/><p:c xmlns:p="urn:w"/></p:a>',
        b"<a>&amp;&lt;&gt;&quot;&apos;<![CDATA[<cdata> & ]]>\xc3\xa9\xe5\x90\x8d</a>",
        b'<a x="&#9;&#10;&#13; &lt;"> \n\t </a>',
    ],
)
def test_namespaces_and_escapes_round_trip(xml, small_dictionary) -> None:
    message = Message.from_xml(xml)
    for name in FORMATS:
        decoded = formats.decode(name, formats.encode(name, xml, dictionary=small_dictionary), dictionary=small_dictionary)
        assert infoset(decoded) == infoset(xml), name
        assert infoset(decoded.to_xml()) == infoset(xml), name
        if name in STREAMS:
            assert decoded.nsmaps == message.nsmaps, name


def test_text_passes_published_bytes_through() -> None:
    xml = b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<a>caf\xe9</a>'
    assert formats.encode("text", xml) == xml
    assert formats.decode("text", xml).texts == ["caf\u00e9"]
    assert formats.decode("stream", formats.encode("stream", xml)).texts == ["caf\u00e9"]
