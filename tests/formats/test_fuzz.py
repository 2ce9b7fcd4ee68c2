"""Untrusted payloads: random bytes, mutated and truncated payloads of every format
only ever raise formats.FormatError -- never another exception, never a hang -- and
whatever does decode is a well-formed element table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import formats
from formats import FormatError

from .docgen import SETTINGS
from .infoset import check_invariants

# A hang is a failure too (pytest-timeout), not just an exception.
pytestmark = pytest.mark.timeout(300)

FORMATS = formats.available()
SEED = (
    b'<nitf xmlns:x="urn:x" version="3"><head><title>Stocks</title><meta name="a" content="b"/></head>'
    b'<body><p x:lede="1">SF &amp; LA<em>up</em> 3%</p><unknown z="1">\xc3\xa9</unknown></body></nitf>'
)


def _decode_only_format_errors(name: str, payload: bytes, dictionary: formats.Dictionary) -> None:
    try:
        message = formats.decode(name, payload, dictionary=dictionary)
    except FormatError:
        return
    check_invariants(message)
    try:
        message.to_xml()
    except FormatError:
        pass  # e.g. a control character flipped into a text: refused when serialized


@pytest.fixture(scope="module")
def seeds(small_dictionary) -> dict[str, bytes]:
    return {name: formats.encode(name, SEED, dictionary=small_dictionary) for name in FORMATS}


@pytest.mark.parametrize("name", FORMATS)
@settings(SETTINGS, max_examples=40)
@given(payload=st.binary(max_size=300))
def test_random_bytes(name, payload, small_dictionary) -> None:
    _decode_only_format_errors(name, payload, small_dictionary)


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """Flip, overwrite, insert, delete or truncate bytes of a valid payload."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        if not out:
            break
        i = draw(st.integers(0, len(out) - 1))
        if op == "flip":
            out[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            out[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xC0, 0xDC, 0xDD, 0xFF]))
        elif op == "insert":
            out[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del out[i : i + draw(st.integers(1, 4))]
        else:
            del out[i:]
    return bytes(out)


@pytest.mark.parametrize("name", FORMATS)
@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_mutated_payloads(name, data, seeds, small_dictionary) -> None:
    _decode_only_format_errors(name, data.draw(mutations(seeds[name])), small_dictionary)


@pytest.mark.parametrize("name", FORMATS)
def test_every_truncation_is_a_format_error(name, seeds, small_dictionary) -> None:
    blob = seeds[name]
    for end in range(len(blob)):
        with pytest.raises(FormatError):
            formats.decode(name, blob[:end], dictionary=small_dictionary)


@pytest.mark.parametrize("name", FORMATS)
def test_a_payload_of_another_format_is_a_format_error(name, seeds, small_dictionary) -> None:
    for other, blob in seeds.items():
        if other == name or other.startswith("text") and name.startswith("text") and "+" not in name + other:
            continue
        try:
            message = formats.decode(name, blob, dictionary=small_dictionary)
        except FormatError:
            continue
        # Only identical bytes may be read the same way, e.g. text vs. text.
        assert message.to_xml() == formats.decode(other, blob, dictionary=small_dictionary).to_xml()


@pytest.mark.parametrize("name", [n for n in FORMATS if "+" in n])
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_mutated_payloads_under_a_valid_compression_layer(name, data, seeds, small_dictionary) -> None:
    """Compression checksums catch most mutations; this reaches the base decoders
    with mutated content that decompresses cleanly."""
    fmt = formats.get(name)
    raw = data.draw(mutations(fmt.unpack(seeds[name], small_dictionary)))
    _decode_only_format_errors(name, fmt.pack(raw, small_dictionary), small_dictionary)
