"""Checks for the XML names that binary payloads and dictionaries carry.

A text message is checked by the XML parser; a binary one is not parsed, so every
name it introduces (element and attribute names in Clark notation, namespace
prefixes) is checked here before it reaches a :class:`formats.Message`.

>>> check_name("{http://iptc.org/std/nar/2006-10-01/}newsItem")
'{http://iptc.org/std/nar/2006-10-01/}newsItem'
>>> check_name("1st")
Traceback (most recent call last):
...
formats.errors.FormatError: invalid XML name '1st'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from formats.errors import FormatError

# XML 1.0 (fifth edition) NameStartChar and NameChar, without ':' (namespaces).
_START = (
    "A-Z_a-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff"
    "\u200c-\u200d\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd"
    "\U00010000-\U000effff"
)
_CHAR = _START + r"\-.0-9\u00b7\u0300-\u036f\u203f-\u2040"
_NCNAME = f"[{_START}][{_CHAR}]*"
_CLARK = re.compile(rf"(?:\{{[^{{}}\x00-\x08\x0b\x0c\x0e-\x1f]+\}})?{_NCNAME}")
_PREFIX = re.compile(_NCNAME)
_URI_BAD = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def check_name(name: object) -> str:
    """Return ``name`` if it is an element or attribute name in Clark notation
    (``'{uri}local'`` or ``'local'``), else raise :class:`FormatError`."""
    if type(name) is not str or not _valid_name(name):
        raise FormatError(f"invalid XML name {name!r}")
    return name


@lru_cache(maxsize=4096)
def _valid_name(name: str) -> bool:
    # Cached: the same few hundred names recur in every message of a source.
    return _CLARK.fullmatch(name) is not None


_SEEN: set[str] = set()
_SEEN_LIMIT = 1 << 16


def check_names(names: Iterable[object]) -> None:
    """:func:`check_name` for many names at once; names checked before cost one set
    lookup, which is what decoding a message's name table needs to be cheap.
    ``names`` is iterated at most twice (pass a list)."""
    try:
        if _SEEN.issuperset(names):
            return
        new = set(names).difference(_SEEN)
    except TypeError:  # an unhashable item after the first unknown one
        raise FormatError("a name is not a string") from None
    for name in new:
        check_name(name)
    if len(_SEEN) > _SEEN_LIMIT:
        _SEEN.clear()  # bounded: a stream of ever-new names must not grow memory
    _SEEN.update(new)


def check_prefix(prefix: object) -> str | None:
    """Return a namespace prefix (``None`` is the default namespace) if valid."""
    if prefix is None:
        return None
    if type(prefix) is not str or not _PREFIX.fullmatch(prefix) or prefix in ("xml", "xmlns"):
        raise FormatError(f"invalid namespace prefix {prefix!r}")
    return prefix


def check_uri(uri: object) -> str:
    """Return a namespace URI if it is a string of XML characters (``''`` undeclares)."""
    if type(uri) is not str or _URI_BAD.search(uri):
        raise FormatError(f"invalid namespace URI {uri!r}")
    return uri
