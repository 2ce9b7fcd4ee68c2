"""The packet header as Kafka headers: round trip, and a clear FormatError for
anything a broker cannot act on."""

from __future__ import annotations

import pytest

import formats
from formats import DictionaryStore, FormatError, PacketHeader


def test_round_trip_through_kafka_headers() -> None:
    header = PacketHeader(
        "xml",
        format="stream-dict+zstd-dict",
        source_id="afp",
        root_broker="b1",
        message_id="afp:42",
        dictionary_version=7,
        schema_version="NITF 3.6",
    )
    kafka = header.to_kafka()
    assert all(isinstance(k, str) and isinstance(v, bytes) for k, v in kafka)
    assert dict(kafka)["onyx-flow"] == b"xml"
    assert dict(kafka)["onyx-dictionary-version"] == b"7"
    assert PacketHeader.from_kafka(kafka) == header


@pytest.mark.parametrize("flow", formats.FLOWS)
def test_every_flow_round_trips(flow) -> None:
    header = PacketHeader(flow, format="text" if flow == "xml" else None, message_id="m1")
    assert PacketHeader.from_kafka(header.to_kafka()) == header


def test_other_headers_are_ignored_and_spark_rows_accepted() -> None:
    rows = [(b"onyx-flow", bytearray(b"xml")), ("onyx-format", b"text"), ("traceparent", b"00-ab"), ("onyx-future", b"x")]
    assert PacketHeader.from_kafka(rows) == PacketHeader("xml", format="text")


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([], "no onyx-flow"),
        (None, "no onyx-flow"),
        ([("onyx-flow", b"video")], "unknown packet flow"),
        ([("onyx-flow", b"xml")], "must name its format"),
        ([("onyx-flow", b"xml"), ("onyx-format", b"yaml")], "unknown format 'yaml'"),
        ([("onyx-flow", b"xml"), ("onyx-format", b"stream-dict")], "needs a dictionary"),
        ([("onyx-flow", b"xml"), ("onyx-format", b"text+zstd-dict"), ("onyx-source", b"s")], "needs a dictionary"),
        ([("onyx-flow", b"xml"), ("onyx-flow", b"xml")], "appears twice"),
        ([("onyx-flow", b"\xff")], "not UTF-8"),
        ([("onyx-flow", None)], "has no value"),
        ([("onyx-flow", b"")], "is empty"),
        (
            [("onyx-flow", b"xml"), ("onyx-format", b"stream-dict"), ("onyx-source", b"s"), ("onyx-dictionary-version", b"v2")],
            "not a version number",
        ),
    ],
)
def test_bad_headers_are_format_errors(headers, reason) -> None:
    with pytest.raises(FormatError, match=reason):
        PacketHeader.from_kafka(headers)


def test_unknown_dictionary_version_is_a_clear_format_error(small_dictionary) -> None:
    store = DictionaryStore([small_dictionary])
    blob = formats.encode("stream-dict", b"<nitf/>", dictionary=small_dictionary)
    good = PacketHeader("xml", format="stream-dict", source_id="gen", dictionary_version=small_dictionary.version)
    assert good.decode(blob, store).tags == ["nitf"]
    bad = PacketHeader("xml", format="stream-dict", source_id="gen", dictionary_version=99)
    with pytest.raises(FormatError, match=r"unknown dictionary version 99 for source 'gen' \(known: 1\)"):
        bad.decode(blob, store)
    with pytest.raises(FormatError, match="unknown dictionary version"):
        PacketHeader("xml", format="stream-dict", source_id="other", dictionary_version=1).decode(blob, store)


def test_decoding_needs_an_xml_packet() -> None:
    with pytest.raises(FormatError, match="does not carry a message"):
        PacketHeader("control").decode(b"{}")
    assert PacketHeader("xml", format="text").decode(b"<a/>").tags == ["a"]
