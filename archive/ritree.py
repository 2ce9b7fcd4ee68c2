"""The relational interval tree, RI-tree (Kriegel, Pötke, Seidl; thesis section 3.2.2, the
"IR-Tree" of section 4.1.5), on two B+-trees or on SQL tables.

A virtual backbone, the complete binary tree over ``1 .. 2^h - 1`` (root ``2^(h-1)``),
is computed, never stored: an interval ``[l, u]`` is registered at its fork, the first
node on the path down from the root that lies inside it. Two indexes hold
``(fork, lower, id)`` and ``(fork, upper, id)``. A query ``[ql, qu]`` walks the two
paths to ``ql`` and ``qu`` (no I/O): nodes left of ``ql`` need ``upper >= ql`` from the
upper index, nodes right of ``qu`` need ``lower <= qu`` from the lower index, and every
fork between ``ql`` and ``qu`` qualifies. Intervals whose end is unknown (still open)
live in a third index keyed by their start (section 3.2.2: they meet a query that ends
after they start).

Intervals here are half-open ``[lo, hi)`` over integers ``>= 0`` (an interval ``[a, b)``
meets ``[lo, hi)`` when ``a < hi`` and ``lo < b``); inside, ``[a, b)`` is the closed
``[a + 1, b]`` on the backbone, whose height grows with the largest bound (forks do not
depend on it).

>>> fork(5, 9), fork(5, 6), fork(9, 11), fork(1, 3), fork(13, 15), fork(2, 14)
(8, 6, 10, 2, 14, 8)
>>> query_nodes(5, 9, 4)
([4], [12, 10])
>>> r = RITree()
>>> for lo, hi, name in [(0, 3, "a"), (4, 6, "b"), (8, 11, "c"), (1, 14, "d"), (12, 15, "e")]:
...     r.insert(lo, hi, name)
>>> sorted(r.intersecting(4, 9))
['b', 'c', 'd']
"""

from __future__ import annotations

import os
from collections.abc import Hashable

from archive import defaults
from archive.bptree import BPlusTree
from archive.errors import IntervalError, KeyStateError
from archive.pages import PageStore


def fork(lower: int, upper: int) -> int:
    """The fork node of the closed backbone interval ``[lower, upper]`` (``1 <= lower``):
    the node of ``[lower, upper]`` highest in the backbone, the one with the most
    trailing zero bits. With ``p`` the highest bit where the bounds differ that is
    ``(upper >> p) << p``, unless ``lower`` itself ends in ``p + 1`` zeros (the formula
    of the reading notes misses that case: ``[18, 19]`` forks at 18, not 19).

    >>> fork(18, 19), fork(16, 23), fork(7, 7)
    (18, 16, 7)
    """
    if lower == upper:
        return upper
    p = (lower ^ upper).bit_length() - 1
    if lower & ((1 << (p + 1)) - 1) == 0:
        return lower
    return (upper >> p) << p


def query_nodes(ql: int, qu: int, height: int) -> tuple[list[int], list[int]]:
    """The backbone nodes left of ``ql`` and right of ``qu`` on the paths from the root
    of a backbone of ``height`` down to them (the sets ``L_q`` and ``R_q``)."""
    left: list[int] = []
    right: list[int] = []
    for target in (ql, qu):
        node = step = 1 << (height - 1)
        while step:
            step >>= 1
            if node < ql:
                if node not in left:
                    left.append(node)
            elif node > qu:
                if node not in right:
                    right.append(node)
            if node == target:
                break
            node = node - step if target < node else node + step
    return left, right


def encode_id(ident: Hashable) -> bytes:
    """Ids as bytes that sort the same way whatever their type (ints before strings)."""
    if isinstance(ident, bool) or not isinstance(ident, (int, str)):
        raise KeyStateError(f"an interval id is an int or a str, not {ident!r}")
    if isinstance(ident, int):
        return b"i" + (ident + (1 << 63)).to_bytes(9, "big")
    return b"s" + ident.encode()


def decode_id(raw: bytes) -> int | str:
    if raw[:1] == b"i":
        return int.from_bytes(raw[1:], "big") - (1 << 63)
    return raw[1:].decode()


def check_interval(lo: int, hi: int | None) -> None:
    for v in (lo, hi):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise IntervalError(f"interval bounds are ints >= 0, not {v!r}")
    if hi is not None and lo >= hi:
        raise IntervalError(f"empty interval [{lo}, {hi}): lo must be below hi")


class RITree:
    """An RI-tree: ``url`` names SQL tables through SQLAlchemy (``sqlite:///file.db``,
    ``postgresql://...``); without it, two B+-trees (plus one for open intervals) on
    page files at ``path`` + ``.lower`` / ``.upper`` / ``.open`` or in memory, or on one
    ``store`` shared with other structures (flushed, and so made durable, with them)."""

    def __init__(self, url: str | None = None, *, path: str | os.PathLike | None = None,
                 page_size: int = defaults.PAGE_SIZE, buffer_pages: int = defaults.BUFFER_PAGES,
                 table_prefix: str = defaults.RITREE_TABLE_PREFIX, store: PageStore | None = None) -> None:
        if url is not None:
            from archive.ritree_sql import SqlBackend

            self.backend = SqlBackend(url, table_prefix)
        else:
            self.backend = TreeBackend(path, page_size, buffer_pages, store)

    def insert(self, lo: int, hi: int | None, ident: int | str) -> None:
        """Add ``[lo, hi)`` under ``ident`` (``hi=None``: open-ended, still running)."""
        check_interval(lo, hi)
        raw = encode_id(ident)
        if hi is None:
            self.backend.open_add(lo, raw)
        else:
            self.backend.add(fork(lo + 1, hi), lo + 1, hi, raw)

    def delete(self, lo: int, hi: int | None, ident: int | str) -> None:
        """Remove ``[lo, hi)`` of ``ident``; :class:`KeyStateError` if it is not stored."""
        check_interval(lo, hi)
        raw = encode_id(ident)
        if hi is None:
            self.backend.open_remove(lo, raw)
        else:
            self.backend.remove(fork(lo + 1, hi), lo + 1, hi, raw)

    def intersecting(self, lo: int, hi: int | None = None) -> set:
        """Ids of the stored ``[a, b)`` with ``a < hi`` and ``lo < b`` (``hi=None``: no end)."""
        check_interval(lo, hi)
        ql = lo + 1
        qu = hi if hi is not None else max(self.backend.max_upper(), ql)
        height = max(self.backend.max_upper(), qu).bit_length()
        left, right = query_nodes(ql, qu, height)
        raws = self.backend.query(left, right, ql, qu)
        raws |= self.backend.open_before(hi)
        return {decode_id(r) for r in raws}

    def stats(self) -> dict:
        return self.backend.stats()

    def check(self) -> int:
        """Verify the invariants (both B+-trees' own, and every interval registered at
        its fork in both indexes); returns the number of closed intervals."""
        return self.backend.check()

    def reset_counters(self) -> None:
        self.backend.reset_counters()

    def close(self) -> None:
        self.backend.close()


class TreeBackend:
    """The RI-tree's indexes as B+-trees, each on its own page store and buffer (or all
    on one ``store``)."""

    def __init__(self, path, page_size: int, buffer_pages: int, store: PageStore | None = None) -> None:
        if store is not None:
            self.stores = {"shared": store}
            at = dict.fromkeys(("lower", "upper", "open"), store)
        else:
            self.stores = at = {n: PageStore(None if path is None else f"{path}.{n}", page_size, buffer_pages)
                                for n in ("lower", "upper", "open")}
        self.lower = BPlusTree(at["lower"], "ritree_lower")
        self.upper = BPlusTree(at["upper"], "ritree_upper")
        self.open = BPlusTree(at["open"], "ritree_open")
        self.meta = at["upper"].meta.setdefault("ritree", {"max_upper": 1})

    def max_upper(self) -> int:
        return self.meta["max_upper"]

    def add(self, node: int, lower: int, upper: int, raw: bytes) -> None:
        self.lower.insert((node, lower, raw), b"")
        self.upper.insert((node, upper, raw), b"")
        self.meta["max_upper"] = max(self.meta["max_upper"], upper)

    def remove(self, node: int, lower: int, upper: int, raw: bytes) -> None:
        if self.upper.get((node, upper, raw)) is None or self.lower.get((node, lower, raw)) is None:
            raise KeyStateError(f"interval [{lower - 1}, {upper}) of {decode_id(raw)!r} is not stored")
        self.lower.delete((node, lower, raw))
        self.upper.delete((node, upper, raw))

    def open_add(self, lo: int, raw: bytes) -> None:
        self.open.insert((lo, raw), b"")

    def open_remove(self, lo: int, raw: bytes) -> None:
        try:
            self.open.delete((lo, raw))
        except KeyStateError:
            raise KeyStateError(f"open interval [{lo}, ...) of {decode_id(raw)!r} is not stored") from None

    def query(self, left: list[int], right: list[int], ql: int, qu: int) -> set[bytes]:
        out = set()
        for n in left:
            out.update(k[2] for k, _ in self.upper.range((n, ql), (n + 1,)) if k[0] == n)
        for n in right:
            out.update(k[2] for k, _ in self.lower.range((n,), (n, qu + 1)) if k[1] <= qu)
        out.update(k[2] for k, _ in self.lower.range((ql,), (qu + 1,)) if ql <= k[0] <= qu)
        return out

    def open_before(self, hi: int | None) -> set[bytes]:
        return {k[1] for k, _ in self.open.range(None, None if hi is None else (hi,)) if hi is None or k[0] < hi}

    def check(self) -> int:
        for t in (self.lower, self.upper, self.open):
            t.check()
        uppers: dict[tuple[int, bytes], list[int]] = {}
        for (node, upper, raw), _ in self.upper.range():
            uppers.setdefault((node, raw), []).append(upper)
        n = 0
        for (node, lower, raw), _ in self.lower.range():
            ups = uppers.get((node, raw), [])
            assert any(fork(lower, u) == node for u in ups), \
                f"interval of {decode_id(raw)!r} from {lower - 1} is not registered at its fork {node}"
            n += 1
        assert n == sum(len(v) for v in uppers.values()), "the lower and upper indexes differ"
        return n

    def stats(self) -> dict:
        parts = [s.stats() for s in self.stores.values()]
        return {k: sum(p[k] for p in parts) for k in parts[0]}

    def reset_counters(self) -> None:
        for s in self.stores.values():
            s.reset_counters()

    def drop_buffers(self) -> None:
        for s in self.stores.values():
            s.drop_buffer()

    def close(self) -> None:
        for s in self.stores.values():
            s.close()
