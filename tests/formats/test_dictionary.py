"""Dictionaries: learning, versions, schemas, the catalog form, and refusing a
payload encoded with another dictionary."""

from __future__ import annotations

import pytest

import formats
from formats import Dictionary, DictionaryStore, FormatError, learn_dictionary, schema_names

SAMPLE = [b'<nitf><head><title>t%d</title></head><body><p a="1">x</p><p>y</p></body></nitf>' % i for i in range(10)]


def test_learned_codes_follow_frequency_and_new_versions_keep_codes() -> None:
    d1 = learn_dictionary("s", SAMPLE, train_zstd=False)
    assert d1.names[0] == "p" and d1.version == 1 and not d1.zstd
    d2 = learn_dictionary("s", [b"<nitf><extra/></nitf>"], previous=d1, train_zstd=False)
    assert d2.version == 2 and d2.names[: len(d1)] == d1.names and d2.names[-1] == "extra"


def test_training_zstd_needs_a_sample() -> None:
    with pytest.raises(FormatError, match="at least"):
        learn_dictionary("s", SAMPLE[:2])


def test_catalog_form_round_trips_and_rejects_garbage(small_dictionary) -> None:
    data = small_dictionary.to_bytes()
    again = Dictionary.from_bytes(data)
    assert again == small_dictionary and again.zstd == small_dictionary.zstd
    for garbage in (b"", b"\xff", b"[]", b'{"format": "onyx-dictionary/1"}', data.replace(b'"version":1', b'"version":-1')):
        with pytest.raises(FormatError):
            Dictionary.from_bytes(garbage)
    with pytest.raises(FormatError, match="invalid XML name"):
        Dictionary("s", 1, ["ok", "not a name"])
    with pytest.raises(FormatError, match="twice"):
        Dictionary("s", 1, ["a", "a"])


def test_payload_needs_the_exact_dictionary_it_was_encoded_with(small_dictionary) -> None:
    blob = formats.encode("stream-dict", b"<nitf><head/></nitf>", dictionary=small_dictionary)
    other = learn_dictionary("gen", SAMPLE, train_zstd=False)  # same source and version, other names
    with pytest.raises(FormatError, match="encoded with dictionary version 1"):
        formats.decode("stream-dict", blob, dictionary=other)
    with pytest.raises(FormatError, match="needs the source's dictionary"):
        formats.decode("stream-dict", blob)
    zblob = formats.encode("text+zstd-dict", b"<nitf/>", dictionary=small_dictionary)
    with pytest.raises(FormatError):
        formats.decode("text+zstd-dict", zblob, dictionary=learn_dictionary("gen", SAMPLE))
    with pytest.raises(FormatError, match="no trained zstd dictionary"):
        formats.encode("stream+zstd-dict", b"<a/>", dictionary=other)


def test_store_versions_are_immutable() -> None:
    d1 = Dictionary("s", 1, ["a"])
    store = DictionaryStore([d1, Dictionary("s", 3, ["a", "b"])])
    store.add(Dictionary("s", 1, ["a"]))  # the same content again: fine
    with pytest.raises(FormatError, match="already exists"):
        store.add(Dictionary("s", 1, ["b"]))
    assert store.latest("s").version == 3 and store.latest("t") is None
    assert ("s", 1) in store and ("s", 2) not in store and len(store) == 2


DTD = b"""<!ENTITY % common "id ID #IMPLIED">
<!ELEMENT nitf (head?, body)>
<!ATTLIST nitf version CDATA #FIXED "-//IPTC//DTD NITF 3.6//EN" xml:lang NMTOKEN #IMPLIED %common;>
<!ELEMENT head (title?)> <!ELEMENT title (#PCDATA)>
<!ATTLIST title type (main|subtitle) 'main' x:odd CDATA #IMPLIED>"""

XSD = b"""<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="urn:t"
    elementFormDefault="qualified">
  <xs:element name="item"><xs:complexType><xs:sequence>
    <xs:element name="title"/><xs:element ref="item"/><xs:element name="local" form="unqualified"/>
  </xs:sequence><xs:attribute name="guid"/><xs:attribute name="q" form="qualified"/></xs:complexType></xs:element>
  <xs:attribute name="global"/>
</xs:schema>"""


def test_schema_names_from_a_dtd_and_an_xml_schema() -> None:
    assert schema_names(DTD) == ["nitf", "head", "title", "version", "{http://www.w3.org/XML/1998/namespace}lang", "type"]
    assert schema_names(XSD) == ["{urn:t}item", "{urn:t}title", "local", "guid", "{urn:t}q", "{urn:t}global"]
    with pytest.raises(FormatError):
        schema_names(b"<notaschema/>")
    d = learn_dictionary("s", [b"<nitf><body/></nitf>"], schema=DTD, train_zstd=False)
    assert d.names == ("nitf", "body", "head", "title", "version", "{http://www.w3.org/XML/1998/namespace}lang", "type")
