"""The element stream's validation: hand-made payloads that are valid msgpack but
not a well-formed element table are refused with a reason."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import formats
from formats import FormatError

from .docgen import SETTINGS
from .infoset import check_invariants

GOOD = [1, None, None, ["a", "b"], [0, 1, 1], [1, 2, 2], [{}, {"x": "1"}, {}], ["", "t", ""], ["", "", "u"], []]


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
        (with_field(3, ["a", "a"]), "twice"),
        (with_field(4, [0, 1, 2]), "outside its name table"),
        (with_field(4, [0, 1, -1]), "outside its name table"),
        (with_field(4, [0, 1, "1"]), "outside its name table"),
        (with_field(4, []), "different lengths"),
        (with_field(5, [1, 2]), "different lengths"),
        (with_field(5, [1, 3, 2]), "depth 3"),
        (with_field(5, [1, 2, 1]), "more than one root"),
        (with_field(5, [2, 3, 3]), "root first"),
        (with_field(5, [1, 2, 2.0]), "integers"),
        (with_field(5, [1, 2, True]), "integers"),
        (with_field(6, [{}, [], {}]), "not maps"),
        (with_field(6, [{}, {"x": 1}, {}]), "non-string attribute"),
        (with_field(6, [{}, {"1x": "v"}, {}]), "invalid XML name"),
        (with_field(7, ["", b"t", ""]), "non-string text"),
        (with_field(8, ["t", "", ""]), "tail on the root"),
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
    n = formats.message.MAX_DEPTH + 1
    with pytest.raises(FormatError, match="depths"):
        decode([1, None, None, ["a"], [0] * n, list(range(1, n + 1)), [{}] * n, [""] * n, [""] * n, []])


def test_stream_dict_codes_and_kind(small_dictionary) -> None:
    blob = formats.encode("stream-dict", b'<nitf version="3"/>', dictionary=small_dictionary)
    fields = msgpack.unpackb(blob, strict_map_key=False)
    with pytest.raises(FormatError, match="not stream "):
        formats.decode("stream", blob)
    fields[6] = [{len(small_dictionary) + 5: "v"}]
    with pytest.raises(FormatError, match="attribute codes"):
        formats.decode("stream-dict", msgpack.packb(fields), dictionary=small_dictionary)
    fields[6], fields[3] = [{}], ["nitf"]
    with pytest.raises(FormatError, match="already has"):
        formats.decode("stream-dict", msgpack.packb(fields), dictionary=small_dictionary)


VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 300),
        st.floats(allow_nan=False),
        st.sampled_from(["", "a", "b", "1x", "{u}c", "\x00"]),
        st.binary(max_size=3),
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["x", "y", "{u}z", 0, 1]), inner, max_size=2),
    max_leaves=12,
)


@settings(SETTINGS, max_examples=150)
@given(
    changes=st.lists(st.tuples(st.integers(0, 9), VALUES), max_size=2),
    kind=st.sampled_from([1, 2]),
)
def test_structured_fuzz_only_format_errors(changes, kind, small_dictionary) -> None:
    """Valid msgpack, plausible layout, one or two fields replaced by junk."""
    if kind == 1:
        name, fields = "stream", list(GOOD)
    else:
        d = small_dictionary
        name = "stream-dict"
        fields = [2, d.version, d.digest, ["x"], [0, 1, 1], [1, 2, 2], [{}, {len(d): "1"}, {}], ["", "t", ""], ["", "", "u"], []]
    for i, value in changes:
        fields[i] = value
    try:
        m = formats.decode(name, msgpack.packb(fields), dictionary=small_dictionary)
    except FormatError:
        return
    check_invariants(m)
    m.to_xml()
