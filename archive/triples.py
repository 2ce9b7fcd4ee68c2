"""A message as temporal triples ``(message id, element path, value)`` (thesis section
2.2 and Fig. 4.13: the triple is the unit of versioning; here the message's elements and
attributes are its statements).

For every element the archive keeps what a profile's equality predicate can compare
(:mod:`partitioning.predicates`): the string-value (``[. = 'v']``, ``[hl1 = 'v']``),
each direct text node (``[text() = 'v']``) and each attribute (``[@a = 'v']``), under the
element's absolute path in the form of a predicate's pattern (``/nitf/head/title``,
``.../text()``, ``.../@a``, names in Clark notation as the parser writes them). Values
are canonical as the predicates' literals are: a value that reads as an XPath number is
that number, so ``@v = 5`` finds ``v="5.0"``; a string longer than
:data:`~archive.defaults.MAX_VALUE_CHARS` is not kept (a literal that long is never
looked up, it is verified by a scan). In keys a value is bytes: a kind byte (numbers
before strings) and the number's order-preserving 8 bytes or the string's UTF-8, so that
every key has the same component types.

>>> import struct

import struct

from formats import Message
>>> [(p, decode_value(v)) for p, v in sorted(triples(Message.from_xml(b"<a x='1'><b>hi</b><b> 2 </b></a>")))]
[('/a', 'hi 2 '), ('/a/@x', 1.0), ('/a/b', 2.0), ('/a/b', 'hi'), ('/a/b/text()', 2.0), ('/a/b/text()', 'hi')]
>>> value_key("5.0") == value_key(" 5") == value_key(5.0) < value_key("a")
True
"""

from __future__ import annotations

import struct

from formats import Message
from partitioning.predicates import canonical

from archive import defaults

NUMBER, STRING = b"\x00", b"\x01"
"""Value kinds: numbers sort before strings."""

Triple = tuple[str, bytes]


def value_key(value: str | float) -> bytes | None:
    """The key bytes of a message value or a profile literal (canonical: numbers as
    numbers), or ``None`` for a string too long to index."""
    v = float(value) if isinstance(value, int) else canonical(value)
    if isinstance(v, float):
        bits = struct.unpack(">Q", struct.pack(">d", v + 0.0))[0]    # + 0.0: -0.0 is 0.0
        bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | (1 << 63)
        return NUMBER + bits.to_bytes(8, "big")
    if len(v) > defaults.MAX_VALUE_CHARS:
        return None
    return STRING + v.encode()


def decode_value(raw: bytes) -> str | float:
    if raw[:1] == STRING:
        return raw[1:].decode()
    bits = int.from_bytes(raw[1:], "big")
    bits = bits ^ (1 << 63) if bits >> 63 else bits ^ 0xFFFFFFFFFFFFFFFF
    return struct.unpack(">d", struct.pack(">Q", bits))[0]


def triples(msg: Message) -> set[Triple]:
    """The ``(path, kind, value)`` statements of ``msg`` (without repeats)."""
    n = len(msg)
    tags, parents, texts, tails, attrs = msg.tags, msg.parents, msg.texts, msg.tails, msg.attrs
    paths: list[str] = [""] * n
    for i in range(n):
        paths[i] = (paths[parents[i]] if parents[i] >= 0 else "") + "/" + tags[i]
    # String-values bottom-up (children come after their parent in preorder): an
    # element's is its text, then each child's string-value followed by its tail.
    below: list[list[str]] = [[] for _ in range(n)]    # per element, in reverse order
    values: list[str] = [""] * n
    for i in range(n - 1, -1, -1):
        values[i] = texts[i] + "".join(reversed(below[i]))
        if parents[i] >= 0:
            below[parents[i]].append(values[i] + tails[i])
    out: set[Triple] = set()

    def add(path: str, value: str) -> None:
        key = value_key(value)
        if key is not None:
            out.add((path, key))

    for i in range(n):
        add(paths[i], values[i])
        if texts[i]:
            add(paths[i] + "/text()", texts[i])
        for name, value in attrs[i].items():
            add(f"{paths[i]}/@{name}", value)
        p = parents[i]
        if p >= 0 and tails[i]:
            add(paths[p] + "/text()", tails[i])
    return out
