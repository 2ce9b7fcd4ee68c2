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
* ``codes`` -- element names as integers, in document (pre)order;
* ``depths`` -- element depths (root = 1); parents and subtree ends follow from them
  and are recomputed on decode, which also proves the tree is well formed;
* ``attrs`` -- one map per element: name -> value for ``stream`` (msgpack builds the
  dicts in C), code -> value for ``stream-dict``;
* ``texts``, ``tails`` -- text before the first child and after the end tag;
* ``ns`` -- namespace declarations, flattened ``[element, prefix or nil, uri, ...]``.

>>> from formats.message import Message
>>> m = Message.from_xml(b"<a x='1'>hi<b/>there</a>")
>>> STREAM.decode(STREAM.encode(m, None), None).to_xml()
b'<a x="1">hi<b/>there</a>'
"""

from __future__ import annotations

from itertools import chain, compress, repeat
from typing import TYPE_CHECKING

import msgpack

from formats.errors import FormatError
from formats.message import MAX_DEPTH, Message
from formats.names import check_name, check_prefix, check_uri

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
            return msgpack.packb(head + [names, codes, m.depths, attrs, m.texts, m.tails, ns])
        except (TypeError, ValueError, OverflowError) as exc:
            raise FormatError(f"cannot encode message: {exc}") from None

    def decode(self, payload: bytes, dictionary: Dictionary | None) -> Message:
        """Decode and validate a payload; :class:`FormatError` if it is not one."""
        try:
            fields = msgpack.unpackb(payload, strict_map_key=False)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise FormatError(f"{self.name} payload is not valid msgpack: {exc}") from None
        if type(fields) is not list or len(fields) != _FIELDS:
            raise FormatError(f"{self.name} payload does not have the element stream layout")
        kind, version, digest, names, codes, depths, attrs, texts, tails, ns = fields
        if kind != self.kind:
            raise FormatError(f"payload is not {self.name} (layout kind {kind!r})")
        if not (type(names) is list and type(codes) is list and type(ns) is list):
            raise FormatError(f"{self.name} payload does not have the element stream layout")
        n = len(codes)
        if not n or not all(type(col) is list and len(col) == n for col in (depths, attrs, texts, tails)):
            raise FormatError(f"{self.name} payload has columns of different lengths")
        table = self._name_table(names, version, digest, dictionary)
        if set(map(type, codes)) != {int} or min(codes) < 0 or max(codes) >= len(table):
            raise FormatError(f"{self.name} payload has element codes outside its name table")
        tags = list(map(table.__getitem__, codes))
        parents, ends = _structure(depths)
        if not set(map(type, chain(texts, tails))) <= {str} or tails[0]:
            raise FormatError(f"{self.name} payload has non-string text or a tail on the root")
        attrs = self._attributes(attrs, table)
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
        self, names: list, version: object, digest: object, dictionary: Dictionary | None
    ) -> list[str] | tuple[str, ...]:
        local = list(map(check_name, names))
        if len(set(local)) != len(local):
            raise FormatError(f"{self.name} payload lists a name twice")
        if not self.needs_dictionary:
            return local
        if version != dictionary.version or digest != dictionary.digest:
            raise FormatError(
                f"payload was encoded with dictionary version {version!r} of its source, "
                f"not with {dictionary.source_id!r} v{dictionary.version} (or the content differs)"
            )
        if any(name in dictionary.index for name in local):
            raise FormatError(f"{self.name} payload escapes a name its dictionary already has")
        return dictionary.names + tuple(local) if local else dictionary.names

    def _attributes(self, attrs: list, table: list[str] | tuple[str, ...]) -> list[dict[str, str]]:
        if set(map(type, attrs)) != {dict}:
            raise FormatError(f"{self.name} payload has attributes that are not maps")
        if not set(map(type, chain.from_iterable(map(dict.values, attrs)))) <= {str}:
            raise FormatError(f"{self.name} payload has non-string attribute values")
        keys = set(chain.from_iterable(attrs))
        if not self.needs_dictionary:
            for name in keys:
                check_name(name)
            return attrs
        if keys and (set(map(type, keys)) != {int} or min(keys) < 0 or max(keys) >= len(table)):
            raise FormatError(f"{self.name} payload has attribute codes outside its name table")
        name = table.__getitem__
        for i in compress(range(len(attrs)), attrs):
            a = attrs[i]
            attrs[i] = dict(zip(map(name, a), a.values()))
        return attrs


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


def _structure(depths: list) -> tuple[list[int], list[int]]:
    """Parents and subtree ends from preorder depths; :class:`FormatError` unless the
    depths describe one tree (root at 1, each step down by at most one level)."""
    n = len(depths)
    if set(map(type, depths)) != {int} or depths[0] != 1 or max(depths) > MAX_DEPTH:
        raise FormatError(f"element stream depths must be integers from 1 to {MAX_DEPTH}, root first")
    if n > 1 and min(depths[1:]) < 2:
        raise FormatError("element stream has more than one root element")
    parents = [-1] * n
    ends = [n] * n
    open_ = [-1]  # open_[d] is the open element at depth d; -1 stands for "no parent"
    for i, d in enumerate(depths):
        while len(open_) > d:
            ends[open_.pop()] = i
        if len(open_) != d:
            raise FormatError(f"element {i} is at depth {d}, below a parent at depth {len(open_) - 1}")
        parents[i] = open_[-1]
        open_.append(i)
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
