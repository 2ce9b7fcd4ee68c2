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

# <a><b x="1">t</b><b/>u</a>: names, codes, depths, text (texts, then tails after
# the root's), attribute counts, keys and values, namespace declarations.
GOOD = [3, None, None, "a\x00b\x00x", bytes([0, 1, 1]), bytes([1, 2, 2]), "\x00t\x00\x00\x00u",
        bytes([0, 1, 0]), bytes([2]), "1", []]


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
    assert msgpack.unpackb(formats.encode("stream", m.to_xml())) == GOOD


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (GOOD[:10], "layout"),
        ({"a": 1}, "layout"),
        (with_field(0, 4), "layout kind"),
        (with_field(0, 1), "layout kind"),  # the earlier layout, one map per element
        (with_field(3, "a\x001b\x00x"), "invalid XML name"),
        (with_field(3, "a\x00\x00x"), "invalid XML name"),
        (with_field(3, ["a", "b", "x"]), "layout"),
        (with_field(3, "a\x00b"), "attribute codes outside"),
        (with_field(4, bytes([0, 1, 3])), "element codes outside"),
        (with_field(4, [0, 1, 1]), "wrong type or length"),
        (with_field(4, bytes([0, 1])), "wrong type or length"),
        (with_field(4, b""), "wrong type or length"),
        (with_field(4, bytes([0, 0, 1, 0, 3, 0])), "element codes outside"),
        (with_field(5, bytes([1, 2])), "wrong type or length"),
        (with_field(5, bytes([1, 3, 2])), "skips a level"),
        (with_field(5, bytes([1, 2, 1])), "exactly one root"),
        (with_field(5, bytes([1, 2, 0])), "exactly one root"),
        (with_field(5, bytes([2, 3, 3])), "exactly one root"),
        (with_field(5, "\x01\x02\x02"), "wrong type or length"),
        (with_field(6, "\x00t\x00\x00u"), "even number of text nodes"),
        (with_field(6, "\x00t\x00\x00\x00u\x00\x00"), "wrong type or length"),
        (with_field(6, ["", "t", ""]), "layout"),
        (with_field(6, b"\x00t\x00\x00\x00u"), "layout"),
        (with_field(7, bytes([0, 2, 0])), "wrong type or length"),
        (with_field(7, bytes([0, 1])), "wrong type or length"),
        (with_field(7, [0, 1, 0]), "wrong type or length"),
        (with_field(8, bytes([3])), "attribute codes outside"),
        (with_field(8, bytes([2, 2, 2])), "wrong type or length"),
        (with_field(9, "1\x002"), "attributes but other values"),
        (with_field(9, 1), "layout"),
        (with_field(10, [0, None]), "triples"),
        (with_field(10, [5, None, "urn:u"]), "missing element"),
        (with_field(10, [0, "xml", "urn:u"]), "prefix"),
        (with_field(10, [0, "p", ""]), "bad namespace declaration"),
        (with_field(10, [0, None, "u", 0, None, "v"]), "bad namespace declaration"),
        (with_field(10, {}), "layout"),
    ],
)
def test_malformed_tables_are_refused(fields, reason) -> None:
    with pytest.raises(FormatError, match=reason):
        decode(fields)


def test_no_attributes_means_no_values() -> None:
    fields = with_field(7, bytes(3))
    fields[8], fields[9] = b"", ""
    assert decode(fields).attrs == [{}, {}, {}]
    fields[9] = "1"
    with pytest.raises(FormatError, match="0 attributes but other values"):
        decode(fields)


def test_columns_are_built_on_first_use_and_agree() -> None:
    """Attribute maps, ends and parents of a decoded message are built when first
    read; the result is the table the XML parse gives."""
    xml = b'<a p="0"><b x="1" y="2">t<c/>v</b><b/>u<d z=""/></a>'
    m = formats.decode("stream", formats.encode("stream", xml))
    assert not {"attrs", "ends", "parents", "nsmaps"} & vars(m).keys()
    parsed = formats.Message.from_xml(xml)
    assert (m.attrs, m.ends, m.parents, m.nsmaps) == (parsed.attrs, parsed.ends, parsed.parents, parsed.nsmaps)
    assert m.attrs is m.attrs  # stored, not rebuilt
    assert m.attr_names == parsed.attr_names == ["p", "x", "y", "z"]
    assert m.attr_values == parsed.attr_values == ["0", "1", "2", ""]


def test_text_with_nul_cannot_be_encoded() -> None:
    m = formats.Message.from_xml(b"<a>x</a>")
    m.texts[0] = "x\x00y"
    with pytest.raises(FormatError, match="NUL"):
        formats.encode("stream", m)
    m.texts[0] = "x"
    m.attrs[0]["k"] = "\x00"
    with pytest.raises(FormatError, match="NUL"):
        formats.encode("stream", m)


def test_depth_limit() -> None:
    deep = b"<a>" * formats.message.MAX_DEPTH + b"</a>" * formats.message.MAX_DEPTH
    assert len(formats.decode("stream", formats.encode("stream", deep))) == formats.message.MAX_DEPTH
    n = formats.message.MAX_DEPTH + 1
    depths = array("H", range(1, n + 1))
    if sys.byteorder == "big":
        depths.byteswap()
    with pytest.raises(FormatError, match="deeper than the limit of 256"):
        decode([3, None, None, "a", bytes(n), depths.tobytes(), "\x00" * (2 * n - 2), bytes(n), b"", "", []])


def test_stream_dict_codes_and_kind(small_dictionary) -> None:
    d = small_dictionary
    blob = formats.encode("stream-dict", b'<nitf version="3"/>', dictionary=d)
    fields = msgpack.unpackb(blob)
    assert fields[3] == "" and fields[9] == "3"  # every name is in the dictionary
    with pytest.raises(FormatError, match="not stream "):
        formats.decode("stream", blob)
    fields[8] = bytes([len(d)])
    with pytest.raises(FormatError, match="attribute codes"):
        formats.decode("stream-dict", msgpack.packb(fields), dictionary=d)
    fields[4] = bytes([len(d)])
    with pytest.raises(FormatError, match="element codes"):
        formats.decode("stream-dict", msgpack.packb(fields), dictionary=d)


def test_stream_dict_escapes_names_the_dictionary_lacks(small_dictionary) -> None:
    d = small_dictionary
    xml = b'<nitf version="3"><zz q="1"/></nitf>'
    fields = msgpack.unpackb(formats.encode("stream-dict", xml, dictionary=d))
    assert fields[3] == "zz\x00q"  # escaped: codes from len(d) on
    assert list(fields[4])[1] == len(d) and list(fields[8]) == [d.index["version"], len(d) + 1]
    assert formats.decode("stream-dict", msgpack.packb(fields), dictionary=d).to_xml() == xml


VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 300),
        st.floats(allow_nan=False),
        st.sampled_from(["", "a", "b", "1x", "{u}c", "\x00", "\x00\x00", "\x00t\x00\x00\x00u", "1\x002",
                         "a\x00b\x00x", "a\x00x"]),
        st.binary(max_size=4),
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["x", "y", "{u}z", 0, 1]), inner, max_size=2),
    max_leaves=12,
)


@settings(SETTINGS, max_examples=150)
@given(
    changes=st.lists(st.tuples(st.integers(0, 10), VALUES), max_size=2),
    kind=st.sampled_from([3, 4]),
)
@example(changes=[(3, [None, []])], kind=3)  # regression: unhashable name after an unknown one
@example(changes=[(3, "a\x00b")], kind=3)  # a shorter name table: a code falls outside it
def test_structured_fuzz_only_format_errors(changes, kind, small_dictionary) -> None:
    """Valid msgpack, plausible layout, one or two fields replaced by junk."""
    if kind == 3:
        name, fields = "stream", list(GOOD)
    else:
        name = "stream-dict"
        fields = msgpack.unpackb(formats.encode(name, b'<a><b x="1">t</b><b/>u</a>', dictionary=small_dictionary))
    for i, value in changes:
        fields[i] = value
    try:
        m = formats.decode(name, msgpack.packb(fields), dictionary=small_dictionary)
    except FormatError:
        return
    check_invariants(m)  # reads every column: what is built on first use cannot fail
    m.to_xml()


def test_checked_name_tables_are_kept_and_bad_ones_are_not() -> None:
    first, second = decode(GOOD), decode(GOOD)
    assert first.tags[0] is second.tags[0]  # one table, checked once, shared
    bad = with_field(3, "a\x001b\x00x")
    for _ in range(2):
        with pytest.raises(FormatError, match="invalid XML name"):
            decode(bad)


def test_name_with_nul_cannot_be_encoded() -> None:
    m = formats.Message.from_xml(b"<a/>")
    m.tags[0] = "a\x00b"
    with pytest.raises(FormatError, match="NUL"):
        formats.encode("stream", m)
