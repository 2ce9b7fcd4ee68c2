"""The element stream: a message's element table in msgpack, decoded without parsing.

Layout (one msgpack array, columnar so that decoding is mostly one C-level
``msgpack.unpackb`` call and a few C-level ``map``s)::

    [kind, dict_version, dict_digest, names, codes, depths, attrs, texts, tails, ns]

* ``kind`` -- 1 for ``stream``, 2 for ``stream-dict`` (a new layout gets new kinds);
* ``dict_version``, ``dict_digest`` -- the dictionary a ``stream-dict`` payload was
  encoded with (``nil`` for ``stream``);
* ``names`` -- Clark names the codes refer to: every element name of the message for
  ``stream``; for ``stream-dict`` only names missing from the dictionary, whose codes
  continue after the dictionary's (the escape for unknown names);
* ``codes`` -- element names as integers, in document (pre)order, packed in a msgpack
  ``bin``: one byte each, or two (little-endian) if a code exceeds 255 -- ``list()``
  of it yields ints without a per-item type check;
* ``depths`` -- element depths (root = 1), packed the same way; parents and subtree
  ends follow from them and are recomputed on decode, which also proves the tree is
  well formed;
* ``attrs`` -- one map per element: name -> value for ``stream`` (msgpack builds the
  dicts in C), code -> value for ``stream-dict``;
* ``texts``, ``tails`` -- text before the first child and after the end tag;
* ``ns`` -- namespace declarations, flattened ``[element, prefix or nil, uri, ...]``.

Decoding checks everything the engine relies on -- one well-formed tree, valid XML
names, strings where strings belong -- so a corrupted payload is a
:class:`FormatError`, never a crash later. It does not re-scan texts for characters
XML forbids (C0 controls): such a text still matches as it is, and
:meth:`Message.to_xml` refuses it with a :class:`FormatError`.

>>> from formats.message import Message
>>> m = Message.from_xml(b"<a x='1'>hi<b/>there</a>")
>>> STREAM.decode(STREAM.encode(m, None), None).to_xml()
b'<a x="1">hi<b/>there</a>'
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING

import msgpack

from formats.errors import FormatError
from formats.message import MAX_DEPTH, Message
from formats.names import check_names, check_prefix, check_uri, known_names

if TYPE_CHECKING:
    from formats.dictionary import Dictionary

_KIND_STREAM = 1
_KIND_STREAM_DICT = 2
_FIELDS = 10
_EMPTY: dict = {}


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
        if not n or any(len(col) != n for col in (m.depths, m.attrs, m.texts, m.tails, m.nsmaps)):
            raise FormatError("cannot encode an empty or inconsistent message table")
        if self.needs_dictionary:
            names, codes, attrs = _codes_with_dictionary(m, dictionary)
            head = [self.kind, dictionary.version, dictionary.digest]
        else:
            names = list(dict.fromkeys(m.tags))
            index = {name: code for code, name in enumerate(names)}
            codes = list(map(index.__getitem__, m.tags))
            attrs = m.attrs
            head = [self.kind, None, None]
        nsmaps = m.nsmaps
        ns = [x for i in compress(range(n), nsmaps) for p, u in nsmaps[i].items() for x in (i, p, u)]
        try:
            columns = [names, _pack_ints(codes), _pack_ints(m.depths), attrs, m.texts, m.tails, ns]
            return msgpack.packb(head + columns)
        except (TypeError, ValueError, OverflowError) as exc:
            raise FormatError(f"cannot encode message: {exc}") from None

    def decode(self, payload: bytes, dictionary: Dictionary | None) -> Message:
        """Decode and validate a payload; :class:`FormatError` if it is not one."""
        # Every check below is a C-level pass (or one short Python loop): decoding is
        # on every broker's receive path and must stay well under an XML parse.
        try:
            fields = msgpack.unpackb(payload, strict_map_key=False)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise FormatError(f"{self.name} payload is not valid msgpack: {exc}") from None
        if type(fields) is not list or len(fields) != _FIELDS:
            raise FormatError(f"{self.name} payload does not have the element stream layout")
        kind, version, digest, names, codes, depths, attrs, texts, tails, ns = fields
        if kind != self.kind:
            raise FormatError(f"payload is not {self.name} (layout kind {kind!r})")
        if not (type(names) is type(attrs) is type(texts) is type(tails) is type(ns) is list):
            raise FormatError(f"{self.name} payload does not have the element stream layout")
        n = len(texts)
        if not n or not len(attrs) == len(tails) == n:
            raise FormatError(f"{self.name} payload has columns of different lengths")
        check_names(names)
        table = self._name_table(names, version, digest, dictionary)
        try:  # codes come from bytes, so never negative: a bad one is an IndexError
            tags = list(map(table.__getitem__, _unpack_ints(codes, n)))
        except IndexError:
            raise FormatError(f"{self.name} payload has element codes outside its name table") from None
        packed = _unpack_ints(depths, n)
        parents, ends = _structure(packed)
        depths = list(packed)
        owners = list(compress(attrs, attrs))  # the elements that have attributes
        try:  # join refuses anything but strings, dict.values anything but dicts, in C
            "".join(texts)
            "".join(tails)
            "".join(chain.from_iterable(map(dict.values, owners)))
        except TypeError:
            raise FormatError(f"{self.name} payload has texts or attributes of the wrong type") from None
        if len(owners) + attrs.count(_EMPTY) != n:  # the others must all be empty maps
            raise FormatError(f"{self.name} payload has attributes that are not maps")
        if tails[0]:
            raise FormatError(f"{self.name} payload has a tail after the root element")
        if self.needs_dictionary:
            by_code = dictionary.by_code
            if names:
                by_code = {**by_code, **dict(enumerate(names, len(dictionary.names)))}
            _rename_attributes(attrs, by_code.__getitem__)
        elif not known_names(chain.from_iterable(owners)):
            check_names(list(chain.from_iterable(owners)))
        return Message(
            tags=tags,
            depths=depths,
            attrs=attrs,
            texts=texts,
            tails=tails,
            ends=ends,
            parents=parents,
            nsmaps=_namespaces(ns, n),
        )

    def _name_table(
        self, names: list[str], version: object, digest: object, dictionary: Dictionary | None
    ) -> list[str] | tuple[str, ...]:
        """Names by code: the payload's own for ``stream``; the dictionary's, then
        the payload's escaped ones, for ``stream-dict``."""
        if not self.needs_dictionary:
            return names
        if version != dictionary.version or digest != dictionary.digest:
            raise FormatError(
                f"payload was encoded with dictionary version {version!r} of its source, "
                f"not with {dictionary.source_id!r} v{dictionary.version} (or the content differs)"
            )
        return dictionary.names + tuple(names) if names else dictionary.names


def _rename_attributes(attrs: list[dict], name: Callable[[int], str]) -> None:
    """Replace the codes keying ``stream-dict`` attributes by names, in place
    (``name`` is a dict lookup: msgpack integers may be negative)."""
    try:
        for i in compress(range(len(attrs)), attrs):
            a = attrs[i]
            attrs[i] = dict(zip(map(name, a), a.values()))
    except (KeyError, TypeError):
        raise FormatError("stream-dict payload has attribute codes outside its name table") from None


def _codes_with_dictionary(
    m: Message, dictionary: Dictionary
) -> tuple[list[str], list[int], list[dict[int, str]]]:
    """Element codes and code-keyed attributes; names the dictionary lacks are
    appended to a per-message table (codes from ``len(dictionary)`` on)."""
    index = dictionary.index
    local: list[str] = []
    try:
        return local, *_coded(m, index)
    except KeyError:
        # Rare (a name the schema or the learning sample did not have): extend the index.
        seen = dict.fromkeys(chain(m.tags, chain.from_iterable(m.attrs)))
        local = [name for name in seen if name not in index]
        extended = {**index, **{name: len(index) + k for k, name in enumerate(local)}}
        return local, *_coded(m, extended)


def _coded(m: Message, index: dict[str, int]) -> tuple[list[int], list[dict[int, str]]]:
    code = index.__getitem__
    codes = list(map(code, m.tags))
    attrs = list(m.attrs)
    for i in compress(range(len(attrs)), attrs):
        a = attrs[i]
        attrs[i] = dict(zip(map(code, a), a.values()))
    return codes, attrs


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


def _structure(depths: bytes | list[int]) -> tuple[list[int], list[int]]:
    """Parents and subtree ends from preorder depths; :class:`FormatError` unless the
    depths describe one tree (root at 1, each step down by at most one level)."""
    if depths[0] != 1 or min(depths[1:], default=2) < 2:
        raise FormatError("element stream must have exactly one root element, at depth 1")
    deepest = max(depths)
    if deepest > MAX_DEPTH:
        raise FormatError(f"elements are nested deeper than the limit of {MAX_DEPTH}")
    # at[d] is the latest element seen at depth d: with steps down of at most one
    # level, that is the open element at depth d, the parent of the next at d + 1.
    at = [-1] * (deepest + 1)
    parents: list[int] = []
    add = parents.append
    previous = 0
    for i, d in enumerate(depths):
        if d > previous + 1:
            raise FormatError(f"element {i} at depth {d} skips a level below depth {previous}")
        add(at[d - 1])
        at[d] = i
        previous = d
    n = len(depths)
    ends = list(range(1, n + 1))
    # A subtree ends where its last child's does. Going backwards, children come
    # before their parent and the last child first: it is the one that finds its
    # parent's end still unset.
    for i, p in zip(range(n - 1, 0, -1), reversed(parents)):
        if ends[p] == p + 1:
            ends[p] = ends[i]
    return parents, ends


def _namespaces(ns: list, n: int) -> list[dict[str | None, str]]:
    nsmaps = list(map(dict.copy, repeat(_EMPTY, n)))
    if len(ns) % 3:
        raise FormatError("element stream namespace list is not made of triples")
    it = iter(ns)
    for i, prefix, uri in zip(it, it, it):
        if type(i) is not int or not 0 <= i < n:
            raise FormatError(f"namespace declaration on a missing element {i!r}")
        declared = nsmaps[i]
        prefix = check_prefix(prefix)
        if prefix in declared or (check_uri(uri) == "" and prefix is not None):
            raise FormatError(f"bad namespace declaration {prefix!r}={uri!r} on element {i}")
        declared[prefix] = uri
    return nsmaps


STREAM = StreamCodec("stream", _KIND_STREAM)
STREAM_DICT = StreamCodec("stream-dict", _KIND_STREAM_DICT)
