"""The element stream's validation: hand-made payloads that are valid msgpack but
not a well-formed element table are refused with a reason."""

from __future__ import annotations

import sys
from array import array

import msgpack
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import formats
from formats import FormatError

from .docgen import SETTINGS
from .infoset import check_invariants

GOOD = [1, None, None, ["a", "b"], bytes([0, 1, 1]), bytes([1, 2, 2]), [{}, {"x": "1"}, {}], ["", "t", ""], ["", "", "u"], []]


def decode(fields: list) -> formats.Message:
    return formats.decode("stream", msgpack.packb(fields))


def with_field(i: int, value: object) -> list:
    fields = list(GOOD)
    fields[i] = value
    return fields


def test_the_hand_made_payload_is_valid() -> None:
    m = decode(GOOD)
    check_invariants(m)
    assert m.to_xml() == b'<a><b x="1">t</b><b/>u</a>'


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (GOOD[:9], "layout"),
        ({"a": 1}, "layout"),
        (with_field(0, 2), "layout kind"),
        (with_field(3, ["a", "1b"]), "invalid XML name"),
        (with_field(3, ["a", 5]), "invalid XML name"),
        (with_field(3, ["a", ["b"]]), "not a string"),
        (with_field(4, bytes([0, 1, 2])), "outside its name table"),
        (with_field(4, [0, 1, 1]), "wrong type or length"),
        (with_field(4, bytes([0, 1])), "wrong type or length"),
        (with_field(4, b""), "wrong type or length"),
        (with_field(4, bytes([0, 0, 1, 0, 2, 0])), "outside its name table"),
        (with_field(7, []), "different lengths"),
        (with_field(5, bytes([1, 2])), "wrong type or length"),
        (with_field(5, bytes([1, 3, 2])), "skips a level"),
        (with_field(5, bytes([1, 2, 1])), "exactly one root"),
        (with_field(5, bytes([1, 2, 0])), "exactly one root"),
        (with_field(5, bytes([2, 3, 3])), "exactly one root"),
        (with_field(5, "\x01\x02\x02"), "wrong type or length"),
        (with_field(6, [{}, [], {}]), "not maps"),
        (with_field(6, [{}, [1], {}]), "wrong type"),
        (with_field(6, [{}, {"x": 1}, {}]), "wrong type"),
        (with_field(6, [{}, {1: "1"}, {}]), "not a string|invalid XML name"),
        (with_field(6, [{}, {"1x": "v"}, {}]), "invalid XML name"),
        (with_field(7, ["", b"t", ""]), "wrong type"),
        (with_field(8, ["t", "", ""]), "tail after the root"),
        (with_field(9, [0, None]), "triples"),
        (with_field(9, [5, None, "urn:u"]), "missing element"),
        (with_field(9, [0, "xml", "urn:u"]), "prefix"),
        (with_field(9, [0, "p", ""]), "bad namespace declaration"),
        (with_field(9, [0, None, "u", 0, None, "v"]), "bad namespace declaration"),
    ],
)
def test_malformed_tables_are_refused(fields, reason) -> None:
    with pytest.raises(FormatError, match=reason):
        decode(fields)


def test_depth_limit() -> None:
    deep = b"<a>" * formats.message.MAX_DEPTH + b"</a>" * formats.message.MAX_DEPTH
    assert len(formats.decode("stream", formats.encode("stream", deep))) == formats.message.MAX_DEPTH
    n = formats.message.MAX_DEPTH + 1
    depths = array("H", range(1, n + 1))
    if sys.byteorder == "big":
        depths.byteswap()
    with pytest.raises(FormatError, match="deeper than the limit of 256"):
        decode([1, None, None, ["a"], bytes(n), depths.tobytes(), [{}] * n, [""] * n, [""] * n, []])


def test_stream_dict_codes_and_kind(small_dictionary) -> None:
    blob = formats.encode("stream-dict", b'<nitf version="3"/>', dictionary=small_dictionary)
    fields = msgpack.unpackb(blob, strict_map_key=False)
    with pytest.raises(FormatError, match="not stream "):
        formats.decode("stream", blob)
    fields[6] = [{len(small_dictionary) + 5: "v"}]
    with pytest.raises(FormatError, match="attribute codes"):
        formats.decode("stream-dict", msgpack.packb(fields), dictionary=small_dictionary)
    fields[6] = [{-1: "v"}]
    with pytest.raises(FormatError, match="attribute codes"):
        formats.decode("stream-dict", msgpack.packb(fields), dictionary=small_dictionary)


VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 300),
        st.floats(allow_nan=False),
        st.sampled_from(["", "a", "b", "1x", "{u}c", "\x00"]),
        st.binary(max_size=4),
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["x", "y", "{u}z", 0, 1]), inner, max_size=2),
    max_leaves=12,
)


@settings(SETTINGS, max_examples=150)
@given(
    changes=st.lists(st.tuples(st.integers(0, 9), VALUES), max_size=2),
    kind=st.sampled_from([1, 2]),
)
@example(changes=[(3, [None, []])], kind=1)  # regression: unhashable name after an unknown one
def test_structured_fuzz_only_format_errors(changes, kind, small_dictionary) -> None:
    """Valid msgpack, plausible layout, one or two fields replaced by junk."""
    if kind == 1:
        name, fields = "stream", list(GOOD)
    else:
        d = small_dictionary
        name = "stream-dict"
        fields = [2, d.version, d.digest, ["x"], bytes([0, 1, 1]), bytes([1, 2, 2]), [{}, {len(d): "1"}, {}], ["", "t", ""], ["", "", "u"], []]
    for i, value in changes:
        fields[i] = value
    try:
        m = formats.decode(name, msgpack.packb(fields), dictionary=small_dictionary)
    except FormatError:
        return
    check_invariants(m)
    m.to_xml()
