"""Composite keys: tuples compared lexicographically (thesis section 4.1.2, the class for
keys over composite attributes), with the checks that keep every two keys comparable and
the shortest separators of the simple-prefix split strategy.

>>> check_key(("S", 17))
('S', 17)
>>> shortest_between(("Company", 1), ("Office", 2), upper_inclusive=False)
('O',)
"""

from __future__ import annotations

from archive.errors import KeyTypeError

_CLASS = {int: "n", float: "n", str: "s", bytes: "b"}


def check_key(key: object) -> tuple:
    """``key`` if it is a non-empty tuple of ints, floats, strings or bytes; else
    :class:`KeyTypeError`."""
    if not isinstance(key, tuple) or not key:
        raise KeyTypeError(f"a key is a non-empty tuple, not {key!r}")
    for part in key:
        if type(part) not in _CLASS:
            raise KeyTypeError(f"key component {part!r} of {key!r} is not an int, float, str or bytes")
    return key


def signature(key: tuple) -> str:
    """The type class of each component (``n``umber, ``s``tring, ``b``ytes)."""
    return "".join(_CLASS[type(p)] for p in key)


def merge_signature(known: str, key: tuple) -> str:
    """The signature after ``key``; :class:`KeyTypeError` when a component's class
    differs from the one earlier keys had there (they could not be compared)."""
    sig = signature(key)
    common = min(len(sig), len(known))
    if sig[:common] != known[:common]:
        raise KeyTypeError(f"key {key!r} has component types {sig!r} where earlier keys had {known!r}")
    return sig if len(sig) > len(known) else known


def _shorter_part(a, b):
    """A short value ``p`` with ``a < p <= b`` for strings/bytes (a prefix of ``b``)."""
    for j in range(1, len(b) + 1):
        if b[:j] > a:
            return b[:j]
    return b


def shortest_between(lo: tuple, hi: tuple, upper_inclusive: bool) -> tuple:
    """A short key ``s`` with ``lo < s < hi`` (or ``<= hi`` when ``upper_inclusive``),
    or ``hi`` itself when none is shorter; ``lo < hi`` (simple prefix B+-tree, 4.1.2)."""
    i = 0
    while i < len(lo) and i < len(hi) and lo[i] == hi[i]:
        i += 1
    if i >= len(hi):
        return hi
    part = hi[i]
    if i < len(lo) and isinstance(part, (str, bytes)):
        part = _shorter_part(lo[i], part)
    cand = hi[:i] + (part,)
    if cand < hi or (upper_inclusive and cand == hi):
        return cand
    return hi
