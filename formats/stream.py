"""The element stream: a message's element table in msgpack, decoded without parsing.

Layout (one msgpack array, columnar so that decoding is one C-level
``msgpack.unpackb`` call, a few C-level ``map``/``split`` calls and no Python loop
over the elements)::

    [kind, dict_version, dict_digest, names, codes, depths, text, counts, keys, values, ns]

* ``kind`` -- 3 for ``stream``, 4 for ``stream-dict`` (1 and 2 were the layout with
  one msgpack map per element; a new layout gets new kinds);
* ``dict_version``, ``dict_digest`` -- the dictionary a ``stream-dict`` payload was
  encoded with (``nil`` for ``stream``);
* ``names`` -- Clark names the codes refer to, joined by NUL into one string: every
  element and attribute name of the message for ``stream``; for ``stream-dict`` only
  names missing from the dictionary, whose codes continue after the dictionary's
  (the escape for unknown names). A source's messages repeat a few such tables:
  the decoder keeps each one it has checked, keyed by that string, so a repeated
  table costs one hash lookup and its names are the same string objects in every
  message (their hashes, which the engine's automaton looks up, already computed);
* ``codes`` -- element names as integers, in document (pre)order, packed in a msgpack
  ``bin``: one byte each, or two (little-endian) if a code exceeds 255 --
  ``map(table.__getitem__, blob)`` turns them into names in C;
* ``depths`` -- element depths (root = 1), packed the same way; parents and subtree
  ends follow from them and are computed only if a consumer asks (the engine's walk
  needs names and depths only, its predicates the rest);
* ``text`` -- one string: each element's text before its first child, then the
  text after each end tag but the root's, joined by NUL (a character XML text
  cannot contain), so one ``str.split`` gives every text node back;
* ``counts`` -- the number of attributes of each element, packed like the codes;
  ``keys`` -- their name codes in document order, packed likewise; ``values`` --
  their values joined by NUL. The per-element maps are built on first use;
* ``ns`` -- namespace declarations, flattened ``[element, prefix or nil, uri, ...]``.

Decoding checks everything the engine relies on -- one well-formed tree, valid XML
names, strings where strings belong, columns of matching lengths -- so a corrupted
payload is a :class:`FormatError`, never a crash later: what is built on first use
cannot fail. It does not re-scan texts for characters XML forbids (C0 controls):
such a text still matches as it is, and :meth:`Message.to_xml` refuses it with a
:class:`FormatError`. A payload naming an attribute twice on one element (the
encoder never writes one) keeps the last value, for matching and ``to_xml`` alike.

>>> from formats.message import Message
>>> m = Message.from_xml(b"<a x='1'>hi<b/>there</a>")
>>> STREAM.decode(STREAM.encode(m, None), None).to_xml()
b'<a x="1">hi<b/>there</a>'
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from functools import partial
from itertools import chain, compress, islice
from operator import sub
from typing import TYPE_CHECKING

import msgpack

from formats.errors import FormatError
from formats.message import MAX_DEPTH, Message
from formats.names import check_names, check_prefix, check_uri

if TYPE_CHECKING:
    from formats.dictionary import Dictionary

_KIND_STREAM = 3
_KIND_STREAM_DICT = 4
_FIELDS = 11
_SEP = "\x00"  # not an XML character: it cannot occur in a text or attribute value
_unpackb = msgpack.unpackb
_TABLES: dict[object, tuple[str, ...]] = {}
"""Name tables already checked, by their joined names (and dictionary digest)."""
_TABLES_LIMIT = 1024


class StreamCodec:
    """``stream`` (names inline) or ``stream-dict`` (names as dictionary codes)."""

    def __init__(self, name: str, kind: int) -> None:
        self.name = name
        self.kind = kind
        self.needs_dictionary = kind == _KIND_STREAM_DICT

    def __repr__(self) -> str:
        return f"<codec {self.name}>"

    def encode_xml(self, xml: bytes, dictionary: Dictionary | None) -> bytes:
        """Parse published XML and encode it."""
        return self.encode(Message.from_xml(xml), dictionary)

    def encode(self, message: Message, dictionary: Dictionary | None) -> bytes:
        """Encode a message table (see the module docstring for the layout)."""
        m = message
        n = len(m.tags)
        attrs = m.attrs
        if not n or any(len(col) != n for col in (m.depths, attrs, m.texts, m.tails)):
            raise FormatError("cannot encode an empty or inconsistent message table")
        attr_names = list(chain.from_iterable(attrs))
        if self.needs_dictionary:
            names, index = _index_with_dictionary(m.tags, attr_names, dictionary)
            head = [self.kind, dictionary.version, dictionary.digest]
        else:
            names = list(dict.fromkeys(chain(m.tags, attr_names)))
            index = {name: code for code, name in enumerate(names)}
            head = [self.kind, None, None]
        code = index.__getitem__
        joined = _SEP.join(names)
        if joined.count(_SEP) != max(len(names) - 1, 0):
            raise FormatError("cannot encode an element or attribute name containing NUL")
        try:
            text = _SEP.join(chain(m.texts, islice(m.tails, 1, None)))
            values = _SEP.join(chain.from_iterable(map(dict.values, attrs)))
        except TypeError as exc:
            raise FormatError(f"cannot encode message: {exc}") from None
        if text.count(_SEP) != 2 * n - 2 or values.count(_SEP) != max(len(attr_names) - 1, 0):
            raise FormatError("cannot encode a text or attribute value containing NUL")
        nsmaps = m.nsmaps
        ns = [x for i in compress(range(n), nsmaps) for p, u in nsmaps[i].items() for x in (i, p, u)]
        try:
            columns = [
                joined,
                _pack_ints(list(map(code, m.tags))),
                _pack_ints(m.depths),
                text,
                _pack_ints(list(map(len, attrs))),
                _pack_ints(list(map(code, attr_names))),
                values,
                ns,
            ]
            return msgpack.packb(head + columns)
        except (TypeError, ValueError, OverflowError) as exc:
            raise FormatError(f"cannot encode message: {exc}") from None

    def decode(self, payload: bytes, dictionary: Dictionary | None) -> Message:
        """Decode and validate a payload; :class:`FormatError` if it is not one."""
        # Every check below is a C-level pass: decoding is on every broker's receive
        # path and must stay well under an XML parse plus walking lxml's tree.
        try:
            fields = _unpackb(payload)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise FormatError(f"{self.name} payload is not valid msgpack: {exc}") from None
        if type(fields) is not list or len(fields) != _FIELDS:
            raise FormatError(f"{self.name} payload does not have the element stream layout")
        kind, version, digest, names, codes, depths, text, counts, keys, values, ns = fields
        if kind != self.kind:
            raise FormatError(f"payload is not {self.name} (layout kind {kind!r})")
        if not (type(ns) is list and type(names) is type(text) is type(values) is str):
            raise FormatError(f"{self.name} payload does not have the element stream layout")
        breaks = text.count(_SEP)
        if breaks & 1:
            raise FormatError(f"{self.name} payload has an even number of text nodes")
        n = (breaks >> 1) + 1
        table = self._name_table(names, version, digest, dictionary)
        if type(codes) is not bytes or len(codes) != n:
            codes = _unpack_ints(codes, n)
        try:  # codes come from bytes, so never negative: a bad one is an IndexError
            tags = list(map(table.__getitem__, codes))
        except IndexError:
            raise FormatError(f"{self.name} payload has element codes outside its name table") from None
        if type(depths) is not bytes or len(depths) != n:
            depths = _unpack_ints(depths, n)
        _check_tree(depths)
        if type(counts) is not bytes or len(counts) != n:
            counts = _unpack_ints(counts, n)
        total = sum(counts)
        if type(keys) is not bytes or len(keys) != total:
            keys = _unpack_ints(keys, total)
        if total and max(keys) >= len(table):
            raise FormatError(f"{self.name} payload has attribute codes outside its name table")
        if (values.count(_SEP) + 1 if values or total else 0) != total:
            raise FormatError(f"{self.name} payload has {total} attributes but other values")
        # Texts and attributes are built if the engine asks (predicates): all that
        # can go wrong with them has been checked above.
        return Message.lazy(
            tags,
            list(depths),
            partial(_text_nodes, text, n),
            partial(_attribute_columns, counts, keys, values, table) if total else None,
            _namespaces(ns, n) if ns else None,
        )

    def _name_table(
        self, names: str, version: object, digest: object, dictionary: Dictionary | None
    ) -> tuple[str, ...]:
        """Names by code: the payload's own for ``stream``; the dictionary's, then the
        payload's escaped ones, for ``stream-dict`` (checked once per distinct table)."""
        if self.needs_dictionary:
            if version != dictionary.version or digest != dictionary.digest:
                raise FormatError(
                    f"payload was encoded with dictionary version {version!r} of its source, "
                    f"not with {dictionary.source_id!r} v{dictionary.version} (or the content differs)"
                )
            if not names:
                return dictionary.names
            key: object = (digest, names)
        else:
            key = names
        table = _TABLES.get(key)
        if table is None:
            own = names.split(_SEP) if names else []
            check_names(own)
            table = dictionary.names + tuple(own) if self.needs_dictionary else tuple(own)
            if len(_TABLES) >= _TABLES_LIMIT:
                _TABLES.clear()  # bounded: a stream of ever-new tables must not grow memory
            _TABLES[key] = table
        return table


def _index_with_dictionary(
    tags: list[str], attr_names: list[str], dictionary: Dictionary
) -> tuple[list[str], dict[str, int]]:
    """The escaped names and the code of every name: the dictionary's, and for names
    it lacks (rare: the schema or the learning sample did not have them) codes from
    ``len(dictionary)`` on."""
    index = dictionary.index
    seen = set(tags).union(attr_names)
    if seen.issubset(index.keys()):
        return [], index
    local = [name for name in dict.fromkeys(chain(tags, attr_names)) if name not in index]
    return local, {**index, **{name: len(index) + k for k, name in enumerate(local)}}


def _text_nodes(text: str, n: int) -> tuple[list[str], list[str]]:
    """Texts and tails of ``n`` elements from the NUL-joined column (built on first use)."""
    texts = text.split(_SEP)
    tails = texts[n - 1 :]
    tails[0] = ""  # the root has no tail: its slot holds the last text
    del texts[n:]
    return texts, tails


def _attribute_columns(
    counts: Sequence[int], keys: Sequence[int], values: str, table: Sequence[str]
) -> tuple[Sequence[int], list[str], list[str]]:
    """Attribute counts, names and values from the flat columns (on first use)."""
    return counts, list(map(table.__getitem__, keys)), values.split(_SEP)


def _pack_ints(values: list[int]) -> bytes:
    """Small non-negative integers as one byte each, or two (little-endian) when
    one of them exceeds 255: ``list(blob)`` gives them back as ints in C."""
    try:
        return bytes(values)
    except ValueError:
        wide = array("H", values)  # OverflowError past 65535: caught by the encoder
        if sys.byteorder == "big":
            wide.byteswap()
        return wide.tobytes()


def _unpack_ints(blob: object, n: int) -> bytes | list[int]:
    """Inverse of :func:`_pack_ints` for ``n`` values (the width follows from the
    length): the bytes themselves when one byte wide (they index and iterate as ints)."""
    if type(blob) is bytes and len(blob) == n:
        return blob
    if type(blob) is bytes and len(blob) == 2 * n:
        wide = array("H", blob)
        if sys.byteorder == "big":
            wide.byteswap()
        return wide.tolist()
    raise FormatError("element stream integer column has the wrong type or length")


def _check_tree(depths: bytes | list[int]) -> None:
    """:class:`FormatError` unless preorder depths (at least one) describe one tree:
    root at 1, no other element at 1 or 0, each step down by at most one level."""
    if depths[0] != 1 or depths.count(1) != 1 or 0 in depths:
        raise FormatError("element stream must have exactly one root element, at depth 1")
    if len(depths) > 1 and max(map(sub, depths[1:], depths)) > 1:
        i = next(i for i in range(1, len(depths)) if depths[i] > depths[i - 1] + 1)
        raise FormatError(f"element {i} at depth {depths[i]} skips a level below depth {depths[i - 1]}")
    if type(depths) is not bytes and max(depths) > MAX_DEPTH:  # one byte holds at most 255
        raise FormatError(f"elements are nested deeper than the limit of {MAX_DEPTH}")


def _namespaces(ns: list, n: int) -> dict[int, dict[str | None, str]]:
    """The declarations per element that declares any (validated)."""
    if len(ns) % 3:
        raise FormatError("element stream namespace list is not made of triples")
    out: dict[int, dict[str | None, str]] = {}
    it = iter(ns)
    for i, prefix, uri in zip(it, it, it):
        if type(i) is not int or not 0 <= i < n:
            raise FormatError(f"namespace declaration on a missing element {i!r}")
        declared = out.setdefault(i, {})
        prefix = check_prefix(prefix)
        if prefix in declared or (check_uri(uri) == "" and prefix is not None):
            raise FormatError(f"bad namespace declaration {prefix!r}={uri!r} on element {i}")
        declared[prefix] = uri
    return out


STREAM = StreamCodec("stream", _KIND_STREAM)
STREAM_DICT = StreamCodec("stream-dict", _KIND_STREAM_DICT)
