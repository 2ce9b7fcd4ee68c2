"""Per-link format choice: any format to any format, redoing only what differs."""

from __future__ import annotations

import pytest

import formats
from formats import Message, learn_dictionary, transcode

from .infoset import infoset

XML = b'<nitf version="3"><head><title>t</title></head><body><p>Stocks &amp; bonds</p></body></nitf>'


@pytest.mark.parametrize("src", formats.available())
def test_any_format_to_any_format(src, small_dictionary) -> None:
    blob = formats.encode(src, XML, dictionary=small_dictionary)
    for dst in formats.available():
        out = transcode(blob, src, dst, dictionary=small_dictionary)
        assert infoset(formats.decode(dst, out, dictionary=small_dictionary)) == infoset(XML), (src, dst)


def test_same_format_passes_bytes_through(small_dictionary) -> None:
    blob = formats.encode("stream-dict+zstd", XML, dictionary=small_dictionary)
    assert transcode(blob, "stream-dict+zstd", "stream-dict+zstd", dictionary=small_dictionary) == blob


def test_compression_change_does_not_decode(monkeypatch, small_dictionary) -> None:
    blob = formats.encode("stream-dict+zlib", XML, dictionary=small_dictionary)

    def refuse(*args, **kwargs):
        raise AssertionError("decoded although only the compression changed")

    monkeypatch.setattr(formats.get("stream-dict").base, "decode", refuse)
    out = transcode(blob, "stream-dict+zlib", "stream-dict+zstd-dict", dictionary=small_dictionary)
    assert out == formats.encode("stream-dict+zstd-dict", XML, dictionary=small_dictionary)


def test_dictionary_change_and_given_message(small_dictionary) -> None:
    newer = learn_dictionary("gen", [XML] * 8, previous=small_dictionary)
    blob = formats.encode("stream-dict", XML, dictionary=small_dictionary)
    out = transcode(blob, "stream-dict", "stream-dict", dictionary=small_dictionary, dst_dictionary=newer)
    assert formats.decode("stream-dict", out, dictionary=newer).to_xml() == XML
    message = Message.from_xml(XML)
    assert transcode(b"ignored", "text", "stream", message=message) == formats.encode("stream", message)
