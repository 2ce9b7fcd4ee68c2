"""The packet header as Kafka headers: round trip, and a clear FormatError for
anything a broker cannot act on."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import formats
from formats import DictionaryStore, FormatError, PacketHeader
from formats.header import MAX_TRANSFORM

from .docgen import SETTINGS


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


_VALUE = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@st.composite
def headers(draw: st.DrawFn) -> PacketHeader:
    """Any valid header: every flow, format and transform, optional fields set or not,
    values of any (non-surrogate) Unicode and any non-negative dictionary version."""
    flow = draw(st.sampled_from(formats.FLOWS))
    fmt = draw(st.sampled_from(formats.available()) if flow == "xml" else st.none() | st.sampled_from(formats.available()))
    optional = {name: draw(st.none() | _VALUE) for name in ("source_id", "root_broker", "message_id", "schema_version")}
    version = draw(st.none() | st.integers(0, 2**63))
    if fmt is not None and formats.get(fmt).needs_dictionary:
        assume(version is not None and optional["source_id"] is not None)
    return PacketHeader(flow, format=fmt, dictionary_version=version,
                        transform=draw(st.none() | st.sampled_from(['{"keeps":[]}', '{"keeps":[],"binding":"/a","where":["b"]}'])), **optional)


@SETTINGS
@given(header=headers(), noise=st.lists(st.tuples(st.sampled_from(["traceparent", "x-onyx", "onyx"]),
                                                 st.binary(max_size=8)), max_size=3))
def test_any_header_round_trips_among_other_headers(header, noise) -> None:
    kafka = header.to_kafka()
    assert PacketHeader.from_kafka(kafka) == header
    assert PacketHeader.from_kafka(noise + kafka[::-1]) == header  # order and others do not matter
    spark_rows = [(k.encode(), bytearray(v)) for k, v in kafka]
    assert PacketHeader.from_kafka(spark_rows) == header


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


def test_a_transform_is_a_bounded_json_object():
    with pytest.raises(FormatError, match="onyx-transform"):
        PacketHeader("xml", format="text", transform="projected")
    with pytest.raises(FormatError, match="onyx-transform"):
        PacketHeader("xml", format="text", transform="{" + "x" * MAX_TRANSFORM)
