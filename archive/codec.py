"""How nodes become page bytes and how many bytes each entry takes (thesis section 4.1:
XXL's converters; variable-length entries, so page overflow is decided by bytes).

Entry sizes are counted with a fixed 9 bytes for each version number, whatever msgpack
needs, so that ending an entry never grows its page.

>>> size_of(("a", 1), b"xy") <= 16
True
>>> decode(encode(Node(0, [[("a",), b"v"]])), 4096).entries
[[('a',), b'v']]
"""

from __future__ import annotations

from functools import lru_cache

import msgpack

from archive.errors import StorageError

VERSION_BYTES = 9
"""msgpack's largest int encoding: what a version field is counted as."""

NODE_OVERHEAD = 16
"""The node header (kind, level, counts) as counted against a page."""


class Node:
    """One page's content: ``level`` (0 = leaf), ``entries`` (lists, layout per
    structure), ``preds`` (MVBT predecessor records), ``size`` (bytes counted)."""

    __slots__ = ("level", "entries", "preds", "size")

    def __init__(self, level: int, entries: list | None = None, preds: list | None = None, size: int = 0) -> None:
        self.level = level
        self.entries = [] if entries is None else entries
        self.preds = [] if preds is None else preds
        self.size = size

    def __repr__(self) -> str:
        return f"Node(level={self.level}, entries={len(self.entries)}, size={self.size})"


def packed_len(obj) -> int:
    return len(msgpack.packb(obj, use_bin_type=True))


@lru_cache(maxsize=1 << 17)
def size_of(key: tuple, item, versions: int = 0) -> int:
    """Bytes one entry ``[key, item, ...]`` is counted as: its packing plus
    ``versions`` fixed-size version fields (memoized: sizes are asked for often)."""
    return packed_len((key, item)) + versions * VERSION_BYTES + 1


def encode(node: Node) -> bytes:
    return msgpack.packb((node.level, node.size, node.preds, node.entries), use_bin_type=True)


def decode(data: bytes, page_size: int) -> Node:
    try:
        level, size, preds, entries = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - any unpacking failure means a damaged page
        raise StorageError(f"damaged page ({exc})") from None
    return Node(level, [list(e) for e in entries], [list(p) for p in preds], size)
