"""The variable-length multiversion B-tree, MVBT (Becker et al.; thesis sections 3.2.1
and 4.1.3-4.1.4: XXL's ``VariableLengthMVBT`` with predecessor pointers, the key-time
sweep with reference-point de-duplication, range delete with its auxiliary index and
range insert).

Transaction time: every change happens at a version that strictly increases, acts on
the current state, and deletes only logically. A leaf entry is ``[key, start, end,
value]`` (``end`` is ``None`` while live), an index entry ``[lo, start, end, child,
frozen]``: the child's smallest key and lifespan; the entries alive at one version
partition their node's key range. The structure is a DAG: a node that overflows (by
bytes) or whose live entries fall below ``d`` of a page (weak version underflow) is
version-split: its live entries are copied into a new node, which holds between
``(1 + e) d`` and ``1 - e d`` of a page (strong version condition), key-split or merged
with a live key neighbour (itself version-split) to get there. Roots are kept in
``root*``, a B+-tree keyed by the version they start at. Every leaf records its
predecessors (page, key range, lifespan), so the key-time sweep goes back in time
without reading a page it does not need, and reports each entry once: in the leaf whose
region holds the entry's reference point ``(key, min(end - 1, v_hi))``.

Range delete (Algorithm 1) closes whole subtrees inside the range without reading
them, marking them ``frozen``; an auxiliary B+-tree of ``(delete version, subtree)``
lets the sweep reach their leaves, whose live entries end at the range's version.

>>> t = MVBT(page_size=1024)
>>> t.insert(("A", "p1", "B"), 1, b"")
>>> t.insert(("A", "p2", "C"), 1 + 1, b"")
>>> t.delete(("A", "p2", "C"), 3)
>>> [k for k, _ in t.timeslice(2)], [k for k, _ in t.timeslice(3)]
([('A', 'p1', 'B'), ('A', 'p2', 'C')], [('A', 'p1', 'B')])
>>> t.history(("A", "p2", "C"))
[(2, 3, b'')]
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator

import msgpack

from archive import conditions, defaults
from archive.bptree import BPlusTree
from archive.codec import NODE_OVERHEAD, VERSION_BYTES, Node, packed_len, size_of
from archive.errors import ArchiveError, EntryTooLargeError, KeyStateError, VersionError
from archive.keys import check_key, merge_signature, shortest_between
from archive.pages import PageStore
from archive.split import check_strategy, partition, pieces

FIRST_VERSION = -1
"""The version of the initial empty root: versions given by callers are >= 0."""


def _leaf_size(e: list) -> int:
    return size_of(e[0], e[3], 2)


def _index_size(e: list) -> int:
    return size_of(e[0], e[3], 2) + 1


def _order(e: list):
    return (e[0], e[1])


def _key_of(e: list):
    return e[0]


class MVBT:
    """A multiversion B-tree in a page file at ``path`` (``None``: in memory) with pages
    of ``page_size`` bytes and parameters ``d``, ``e`` (section 4.1.3)."""

    def __init__(self, path: str | os.PathLike | None = None, page_size: int = defaults.PAGE_SIZE,
                 d: float = defaults.MVBT_D, e: float = defaults.MVBT_E, *,
                 buffer_pages: int = defaults.BUFFER_PAGES, split: str = defaults.SPLIT,
                 store: PageStore | None = None, name: str = "mvbt", check: bool = False) -> None:
        self.store = store if store is not None else PageStore(path, page_size, buffer_pages)
        self._own_store = store is None
        self.name = name
        self.split = check_strategy(split)
        self.cond = conditions.variable(self.store.page_size - NODE_OVERHEAD, d, e)
        self.d, self.e = d, e
        self.max_entry = conditions.max_entry(self.cond)
        # Predecessor records share the page with the live entries: two of them fit in
        # the room the strong upper bound leaves (capacity - (1 - e d) capacity).
        self.pred_budget = int((self.cond.capacity - self.cond.strong_hi) / 2)
        if self.max_entry < 24 or self.pred_budget < 27:   # room for two open-range records
            raise ArchiveError(f"{self.store.page_size}-byte pages are too small for d = {d}, e = {e}")
        meta = self.store.meta.get(name)
        if meta is None:
            meta = self.store.meta[name] = {
                "root": self.store.allocate(Node(0)), "level": 0, "root_born": FIRST_VERSION,
                "last": FIRST_VERSION, "live": 0, "live_known": True, "sig": "", "params": [d, e],
                "deletes": 0}
        elif meta["params"] != [d, e]:
            raise ArchiveError(f"{name} was built with d, e = {meta['params']}, not {[d, e]}")
        self.meta = meta
        self.roots = BPlusTree(self.store, name + ".roots")
        self.deleted = BPlusTree(self.store, name + ".deleted")
        if not self.roots.get((FIRST_VERSION,)):
            self.roots.insert((FIRST_VERSION,), msgpack.packb((meta["root"], 0)))
        self.debug = check

    # -- bookkeeping --------------------------------------------------------------------

    @property
    def last(self) -> int:
        """The latest version a change happened at."""
        return self.meta["last"]

    def _begin(self, version: int) -> int:
        if not isinstance(version, int) or isinstance(version, bool):
            raise VersionError(f"a version is an int, not {version!r}")
        if version < 0:
            raise VersionError(f"versions are >= 0, not {version}")
        if version <= self.meta["last"]:
            raise VersionError(f"version {version} does not follow the last version {self.meta['last']}")
        return version

    def _end(self, version: int, keys: Iterable[tuple]) -> None:
        self.meta["last"] = version
        if self.debug:
            self.check_paths(keys, version)

    def _check_entry(self, key: tuple, value: bytes) -> None:
        check_key(key)
        if not isinstance(value, (bytes, bytearray)):
            raise ArchiveError(f"a value is bytes, not {type(value).__name__}")
        size = size_of(key, bytes(value), 2)
        if size > self.max_entry:
            raise EntryTooLargeError(f"entry of {size} bytes exceeds {self.max_entry} bytes "
                                     f"for {self.store.page_size}-byte pages with d = {self.d}, e = {self.e}")
        self.meta["sig"] = merge_signature(self.meta["sig"], key)

    def _pred_record(self, pid: int, start: int, end: int, lo: tuple, hi: tuple | None) -> list:
        # Key ranges are only used to skip predecessors; a wider range is safe, so long
        # bounds are dropped to the open range instead of growing the page.
        half = self.pred_budget // 2 - 2 * VERSION_BYTES - 8
        if packed_len(lo) > half:
            lo = ()
        if hi is not None and packed_len(hi) > half:
            hi = None
        return [pid, start, end, lo, hi]

    @staticmethod
    def _pred_size(p: list) -> int:
        return packed_len((p[0], p[3], p[4])) + 2 * VERSION_BYTES + 1

    def _resize(self, node: Node) -> None:
        sz = _leaf_size if node.level == 0 else _index_size
        node.size = sum(sz(e) for e in node.entries) + sum(self._pred_size(p) for p in node.preds)

    @staticmethod
    def _live_weight(node: Node) -> int:
        sz = _leaf_size if node.level == 0 else _index_size
        return sum(sz(e) for e in node.entries if e[2] is None)

    def _root_at(self, version: int) -> tuple[int, int, int]:
        """``(pid, level, start)`` of the root at ``version``."""
        found = self.roots.floor((version,))
        pid, level = msgpack.unpackb(found[1])
        return pid, level, found[0][0]

    def _set_root(self, pid: int, level: int, version: int, born: int | None = None) -> None:
        """The root from ``version`` on is ``pid``, a node created at ``born`` (default:
        now; a child that becomes the root was created earlier and must not be mistaken
        for a node of this change)."""
        self.meta["root"], self.meta["level"] = pid, level
        self.meta["root_born"] = version if born is None else born
        value = msgpack.packb((pid, level))
        if self.roots.get((version,)) is None:
            self.roots.insert((version,), value)
        else:
            self.roots.update((version,), value)

    # -- live descent -------------------------------------------------------------------

    def _live_path(self, key: tuple) -> list[list]:
        """``[pid, node, lo, hi, start]`` from the live root to ``key``'s live leaf."""
        pid = self.meta["root"]
        node = self.store.get(pid)
        path = [[pid, node, (), None, self.meta["root_born"]]]
        while node.level > 0:
            lo, hi = path[-1][2], path[-1][3]
            # Index entries are kept in ``_order`` (insort): the live child with the
            # greatest key <= ``key`` (else the first live one) and the live entry after
            # it are found by bisection and a short walk over closed entries (no sort:
            # this runs for every change).
            entries = node.entries
            first_i = 0
            while entries[first_i][2] is not None:
                first_i += 1
            i = bisect_right(entries, key, key=_key_of) - 1
            while i >= 0 and entries[i][2] is not None:
                i -= 1
            if i < first_i:
                i = first_i
            chosen = entries[i]
            j = i + 1
            while j < len(entries) and entries[j][2] is not None:
                j += 1
            if j < len(entries):
                hi = entries[j][0]
            # The first live child covers the node's range from its start (entries
            # before it may have been closed by a range delete).
            if i > first_i:
                lo = chosen[0]
            pid = chosen[3]
            node = self.store.get(pid)
            path.append([pid, node, lo, hi, chosen[1]])
        return path

    # -- single changes -----------------------------------------------------------------

    def insert(self, key: tuple, version: int, value: bytes) -> None:
        """Insert ``key`` with ``value`` at ``version`` (its lifespan starts there);
        :class:`KeyStateError` if ``key`` is live."""
        self._begin(version)
        self._check_entry(key, value)
        path = self._live_path(key)
        pid, leaf = path[-1][0], path[-1][1]
        at = bisect_left(leaf.entries, key, key=_key_of)   # leaf entries are kept in _order
        while at < len(leaf.entries) and leaf.entries[at][0] == key:
            if leaf.entries[at][2] is None:
                raise KeyStateError(f"key {key!r} is live; delete it before inserting it again")
            at += 1
        entry = [key, version, None, bytes(value)]
        insort(leaf.entries, entry, key=_order)
        leaf.size += _leaf_size(entry)
        self.store.put(pid, leaf)
        self.meta["live"] += 1
        if leaf.size > self.cond.capacity:
            self._restructure(path, version)
        self._end(version, [key])

    def delete(self, key: tuple, version: int) -> None:
        """End ``key``'s lifespan at ``version``; :class:`KeyStateError` if not live."""
        self._begin(version)
        check_key(key)
        path = self._live_path(key)
        pid, leaf = path[-1][0], path[-1][1]
        for e in leaf.entries:
            if e[0] == key and e[2] is None:
                e[2] = version
                break
        else:
            raise KeyStateError(f"key {key!r} is not live")
        self.store.put(pid, leaf)
        self.meta["live"] -= 1
        if len(path) > 1 and self._live_weight(leaf) < self.cond.weak:
            self._restructure(path, version)
        self._end(version, [key])

    # -- structure changes --------------------------------------------------------------

    def _restructure(self, path: list[list], version: int, extra: list | None = None) -> None:
        """Version split the last node of ``path`` at ``version`` (with ``extra`` new
        entries), then key split or merge it to meet the strong version condition, and
        fix its parent the same way (section 3.2.1)."""
        pid, node, lo, hi, start = path[-1]
        level = node.level
        fresh = start == version    # created by this very change: replaced, not kept
        live = self._live_copies(node, lo)
        preds = self._inherit(pid, node, lo, hi, start, version, fresh)
        if extra:
            live = sorted(live + extra, key=_order)
        if len(path) == 1:
            self._new_root(live, level, preds, version)
            return
        ppid, parent = path[-2][0], path[-2][1]
        self._drop_child(parent, pid, version, fresh)
        sz = _leaf_size if level == 0 else _index_size
        # Merge with live key neighbours until the strong lower bound is met (one
        # suffices after a single change; a range change can leave the neighbour low too).
        while sum(sz(e) for e in live) < self.cond.strong_lo:
            sib = self._sibling(parent, lo, path[-2][2], path[-2][3])
            if sib is None:
                break
            s_entry, s_lo, s_hi = sib
            s_node = self.store.get(s_entry[3])
            s_fresh = s_entry[1] == version
            s_live = self._live_copies(s_node, s_lo)
            preds += self._inherit(s_entry[3], s_node, s_lo, s_hi, s_entry[1], version, s_fresh)
            self._drop_child(parent, s_entry[3], version, s_fresh)
            live = sorted(live + s_live, key=_order)
            lo = min(lo, s_lo)
            hi = None if hi is None or s_hi is None else max(hi, s_hi)
        self._attach(parent, live, level, preds, lo, hi, version)
        self.store.put(ppid, parent)
        self._after_change(path[:-1], version)

    @staticmethod
    def _live_copies(node: Node, lo: tuple) -> list:
        """Copies of ``node``'s live entries (key order) for a node replacing it. In an
        index node the first live child covers the node's range from ``lo`` even when
        its recorded key is larger (children before it were closed by a range delete):
        the copy records ``lo``, so that the child keeps its range wherever it lands."""
        live = sorted((list(e) for e in node.entries if e[2] is None), key=_order)
        if node.level > 0 and live:
            live[0][0] = lo
        return live

    def _inherit(self, pid: int, node: Node, lo, hi, start: int, version: int, fresh: bool) -> list:
        """Predecessor records a node replacing this one gets (leaves only). A node kept
        as history drops the entries that started at ``version``: they were never
        visible in it, and their copies live on (a fresh child they point to may be
        replaced later in the same change)."""
        if not fresh and any(e[1] == version for e in node.entries):
            node.entries = [e for e in node.entries if e[1] != version]
            self._resize(node)
            self.store.put(pid, node)
        if node.level > 0:
            if fresh:
                self.store.free(pid)
            return []
        if fresh:
            preds = [list(p) for p in node.preds]
            self.store.free(pid)
            return preds
        return [self._pred_record(pid, start, version, lo, hi)]

    def _drop_child(self, parent: Node, pid: int, version: int, fresh: bool) -> None:
        for i, e in enumerate(parent.entries):
            if e[3] == pid and e[2] is None:
                if fresh:
                    del parent.entries[i]
                    parent.size -= _index_size(e)
                else:
                    e[2] = version
                return
        raise ArchiveError(f"page {pid} has no live entry in its parent")

    @staticmethod
    def _sibling(parent: Node, lo: tuple, p_lo: tuple, p_hi: tuple | None):
        """A live key neighbour ``(entry, lo, hi)`` of the child starting at ``lo`` in
        ``parent``, whose range is ``[p_lo, p_hi)``."""
        live = sorted((e for e in parent.entries if e[2] is None), key=_order)
        right = [e for e in live if e[0] > lo]
        left = [e for e in live if e[0] < lo]
        if right:
            e = right[0]
            return e, e[0], right[1][0] if len(right) > 1 else p_hi
        if left:
            e = left[-1]
            return e, (e[0] if len(left) > 1 else p_lo), lo
        return None

    def _pieces(self, live: list, level: int, target: float | None = None) -> list[list]:
        sz = _leaf_size if level == 0 else _index_size
        sizes = [sz(e) for e in live]
        if sum(sizes) <= self.cond.strong_hi:
            return [live] if live else []

        def sep_len(p: int) -> int:
            return packed_len(self._separator(live[p - 1], live[p], level))

        cuts = partition(sizes, self.cond.strong_lo, self.cond.strong_hi, self.split, sep_len, target=target)
        return pieces(live, cuts)

    def _separator(self, left: list, right: list, level: int) -> tuple:
        """The smallest key of the right piece's region (min-key separators)."""
        if level == 0 and self.split == "prefix":
            return shortest_between(left[0], right[0], upper_inclusive=True)
        return right[0]

    def _attach(self, parent: Node, live: list, level: int, preds: list, lo, hi, version: int) -> None:
        """New nodes for ``live`` (cut into pieces) under ``parent``, starting at ``version``."""
        parts = self._pieces(live, level)
        bounds = [lo] + [self._separator(parts[i - 1][-1], parts[i][0], level) for i in range(1, len(parts))]
        for i, part in enumerate(parts):
            p_lo = bounds[i]
            p_hi = bounds[i + 1] if i + 1 < len(parts) else hi
            mine = [p for p in preds if (p_hi is None or p[3] < p_hi) and (p[4] is None or p_lo < p[4])]
            node = Node(level, part, mine)
            self._resize(node)
            if node.size > self.cond.capacity:
                # Inherited records (a change that replaced its own new nodes) crowd the
                # page: widen their ranges to the open one, which is always safe.
                node.preds = [[p[0], p[1], p[2], (), None] for p in mine]
                self._resize(node)
            child = self.store.allocate(node)
            entry = [p_lo, version, None, child, 0]
            insort(parent.entries, entry, key=_order)
            parent.size += _index_size(entry)

    def _new_root(self, live: list, level: int, preds: list, version: int) -> None:
        parts = self._pieces(live, level)
        if len(parts) <= 1:
            node = Node(level, parts[0] if parts else [], preds if level == 0 else [])
            self._resize(node)
            self._set_root(self.store.allocate(node), level, version)
            self._collapse(version)
            return
        root = Node(level + 1)
        self._attach(root, live, level, preds, (), None, version)
        pid = self.store.allocate(root)
        self._set_root(pid, level + 1, version)
        if root.size > self.cond.capacity:
            self._restructure([[pid, root, (), None, version]], version)

    def _collapse(self, version: int) -> None:
        """A root left with one live child is replaced by it (section 3.2.1)."""
        while True:
            pid, level = self.meta["root"], self.meta["level"]
            root = self.store.get(pid)
            if level == 0:
                return
            live = [e for e in root.entries if e[2] is None]
            if len(live) > 1:
                return
            if self.meta["root_born"] == version:
                self.store.free(pid)
            if not live:
                self._set_root(self.store.allocate(Node(0)), 0, version)
                return
            self._set_root(live[0][3], level - 1, version, born=live[0][1])

    def _after_change(self, path: list[list], version: int) -> None:
        node = path[-1][1]
        w = self._live_weight(node)
        if node.size > self.cond.capacity:
            self._restructure(path, version)
        elif len(path) > 1 and w < self.cond.weak:
            self._restructure(path, version)
        elif len(path) > 1 and path[-1][4] == version and w > self.cond.strong_hi:
            # A node this change created and then grew (a range change repairs several
            # children of one parent): split it again to meet the strong condition.
            self._restructure(path, version)
        elif len(path) == 1:
            self._collapse(version)

    # -- range changes ------------------------------------------------------------------

    def delete_range(self, key_lo: tuple, key_hi: tuple, version: int) -> None:
        """End at ``version`` every live key in ``[key_lo, key_hi]`` (Algorithm 1): whole
        subtrees inside the range are closed without being read and recorded in the
        auxiliary index; the boundary paths are trimmed and repaired."""
        self._begin(version)
        check_key(key_lo), check_key(key_hi)
        if key_hi < key_lo:
            raise ArchiveError(f"empty key range [{key_lo!r}, {key_hi!r}]")
        pid = self.meta["root"]
        self._mark(pid, self.store.get(pid), (), None, key_lo, key_hi, version)
        # Repair bottom-up along both boundary paths until no node breaks a condition.
        for _ in range(8 * (self.meta["level"] + 2)):
            if not self._repair_one(key_lo, version) and not self._repair_one(key_hi, version):
                break
        self._collapse(version)
        self._end(version, [key_lo, key_hi])

    def _mark(self, pid: int, node: Node, lo, hi, klo, khi, version: int) -> None:
        changed = False
        if node.level == 0:
            for e in node.entries:
                if e[2] is None and klo <= e[0] <= khi:
                    e[2] = version
                    self.meta["live"] -= 1
                    changed = True
        else:
            live = sorted((e for e in node.entries if e[2] is None), key=_order)
            for i, e in enumerate(live):
                c_lo = e[0] if i else lo
                c_hi = live[i + 1][0] if i + 1 < len(live) else hi
                if not (c_lo <= khi and (c_hi is None or c_hi > klo)):
                    continue
                if c_lo >= klo and c_hi is not None and c_hi <= khi:
                    e[2], e[4] = version, 1
                    self.meta["live_known"] = False
                    n = self.meta["deletes"] = self.meta["deletes"] + 1
                    self.deleted.insert((version, n), msgpack.packb((e[3], e[1], c_lo, c_hi, node.level - 1)))
                    changed = True
                else:
                    self._mark(e[3], self.store.get(e[3]), c_lo, c_hi, klo, khi, version)
        if changed:
            self._resize(node)
            self.store.put(pid, node)

    def _repair_one(self, key: tuple, version: int) -> bool:
        self._collapse(version)
        path = self._live_path(key)
        for depth in range(len(path) - 1, 0, -1):
            node = path[depth][1]
            if node.size > self.cond.capacity or self._live_weight(node) < self.cond.weak:
                parent = path[depth - 1][1]
                if depth > 1 and sum(1 for e in parent.entries if e[2] is None) < 2:
                    continue   # no sibling to merge with: the parent is repaired first
                self._restructure(path[:depth + 1], version)
                return True
        return False

    def insert_range(self, items: Iterable[tuple[tuple, bytes]], version: int) -> None:
        """Insert every ``(key, value)`` of ``items`` (sorted by key, none live) at
        ``version`` (section 4.1.4): per live leaf the range falls into, the leaf is
        version-split together with the new entries, bulk-loaded by key into pages that
        meet the strong version condition and attached to the live tree, whose path
        nodes split (n-way) as needed. O(log n + r/B) pages."""
        self._begin(version)
        entries, prev = [], None
        for key, value in items:
            self._check_entry(key, value)
            if prev is not None and not prev < key:
                raise ArchiveError(f"keys must be sorted and distinct: {key!r} after {prev!r}")
            entries.append([key, version, None, bytes(value)])
            prev = key
        if not entries:
            raise ArchiveError("insert_range needs at least one entry")
        live_keys = [k for k, *_ in self._sweep(entries[0][0], entries[-1][0], version - 1, version - 1)]
        if live_keys and any(e[0] in set(live_keys) for e in entries):
            raise KeyStateError(f"range insert meets live key {live_keys[0]!r}")
        rest = entries
        while rest:
            path = self._live_path(rest[0][0])
            hi = path[-1][3]
            n = len(rest) if hi is None else next((i for i, e in enumerate(rest) if e[0] >= hi), len(rest))
            batch, rest = rest[:n], rest[n:]
            pid, leaf = path[-1][0], path[-1][1]
            self.meta["live"] += len(batch)
            added = sum(_leaf_size(e) for e in batch)
            fresh = path[-1][4] == version
            if leaf.size + added <= self.cond.capacity and \
                    not (fresh and self._live_weight(leaf) + added > self.cond.strong_hi):
                for e in batch:
                    insort(leaf.entries, e, key=_order)
                leaf.size += added
                self.store.put(pid, leaf)
            else:
                self._restructure(path, version, extra=batch)
        self._end(version, [entries[0][0], entries[-1][0]])

    # -- queries ------------------------------------------------------------------------

    def timeslice(self, version: int) -> Iterator[tuple[tuple, bytes]]:
        """``(key, value)`` of the entries alive at ``version`` (start <= version < end),
        in key order: a descent at one version, the sweep's special case."""
        pid, level, _ = self._root_at(version)
        yield from self._slice(pid, version, None)

    def _slice(self, pid: int, version: int, clip) -> Iterator[tuple[tuple, bytes]]:
        node = self.store.get(pid)
        if node.level == 0:
            for e in node.entries:
                end = e[2] if clip is None or (e[2] is not None and e[2] < clip) else clip
                if e[1] <= version and (end is None or version < end):
                    yield e[0], e[3]
            return
        for e in sorted((e for e in node.entries if e[1] <= version and (e[2] is None or version < e[2])),
                        key=_order):
            c_clip = clip
            if e[4]:   # a subtree a range delete closed: its live entries end with it
                c_clip = e[2] if clip is None else min(clip, e[2])
            yield from self._slice(e[3], version, c_clip)

    def range(self, key_lo: tuple, key_hi: tuple, v_lo: int, v_hi: int
              ) -> Iterator[tuple[tuple, bytes, int, int | None]]:
        """``(key, value, start, end)`` with ``key_lo <= key <= key_hi`` whose lifespan
        ``[start, end)`` meets the closed ``[v_lo, v_hi]`` (key-time sweep, section
        4.1.3); ``end`` is ``None`` while the entry is live."""
        if v_hi < v_lo:
            raise ArchiveError(f"empty version range [{v_lo}, {v_hi}]")
        for key, value, start, end in self._sweep(key_lo, key_hi, v_lo, v_hi):
            if end is None and v_hi < self.last:
                end = self._end_of(key, start, v_hi)
            yield key, value, start, end

    def history(self, key: tuple) -> list[tuple[int, int | None, bytes]]:
        """Every lifespan of ``key``: ``(start, end, value)`` by start (the sweep over
        one key and all versions: pure-key query)."""
        check_key(key)
        out = [(s, e, v) for _, v, s, e in self._sweep(key, key, FIRST_VERSION, max(self.last, 0))]
        return sorted(out)

    def _sweep(self, klo, khi, tlo: int, thi: int) -> Iterator[tuple[tuple, bytes, int, int | None]]:
        """Key-time sweep over ``[klo, khi] x [tlo, thi]`` (closed): descend at ``thi``,
        then follow predecessors back while their regions meet the query; each entry is
        reported in the leaf holding its reference point."""
        visited: set[int] = set()
        pid, level, rstart = self._root_at(thi)
        stack = [(pid, (), None, rstart, None, thi)]
        # Subtrees a range delete closed are entered from the auxiliary index.
        for (dv, _), raw in self.deleted.range((tlo + 1,), None):
            spid, sstart, slo, shi, _lvl = msgpack.unpackb(raw, use_list=False)
            at = min(thi, dv - 1)
            if sstart <= at and slo <= khi and (shi is None or shi > klo):
                stack.append((spid, slo, shi, sstart, dv, at))
        while stack:
            pid, lo, hi, start, clip, at = stack.pop()
            node = self.store.get(pid)
            if node.level == 0:
                yield from self._leaf_sweep(pid, node, start, None, clip, klo, khi, tlo, thi, visited)
                continue
            alive = sorted((e for e in node.entries if e[1] <= at and (e[2] is None or at < e[2])), key=_order)
            for i, e in enumerate(alive):
                c_lo = e[0] if i else lo
                c_hi = alive[i + 1][0] if i + 1 < len(alive) else hi
                if c_lo <= khi and (c_hi is None or c_hi > klo):
                    c_clip = clip
                    if e[4]:
                        c_clip = e[2] if clip is None else min(clip, e[2])
                    stack.append((e[3], c_lo, c_hi, e[1], c_clip, at))

    def _leaf_sweep(self, pid, node, start, end, clip, klo, khi, tlo, thi, visited):
        """Report a leaf's entries whose reference point it holds, then its predecessors'
        (a stack, not recursion: a key's leaves can be split thousands of times)."""
        todo = [(pid, node, start, end, clip)]
        while todo:
            pid, node, start, end, clip = todo.pop()
            if pid in visited:
                continue
            visited.add(pid)
            for e in node.entries:
                if not klo <= e[0] <= khi or e[1] > thi:
                    continue
                stop = e[2]
                if clip is not None and (stop is None or stop > clip):
                    stop = clip
                if stop is not None and stop <= tlo:
                    continue
                ref = thi if stop is None else min(stop - 1, thi)
                if start <= ref and (end is None or ref < end):
                    yield e[0], e[3], e[1], stop
            for ppid, pstart, pend, plo, phi in node.preds:
                if pend > tlo and pstart <= thi and plo <= khi and (phi is None or phi > klo) \
                        and ppid not in visited:
                    todo.append((ppid, self.store.get(ppid), pstart, pend, None))

    def _alive(self, key: tuple, start: int, version: int) -> bool:
        """Is the entry of ``key`` that started at ``start`` alive at ``version``?"""
        return any(k == key and s == start for k, _, s, _ in self._sweep(key, key, version, version))

    def _end_of(self, key: tuple, start: int, after: int) -> int | None:
        """The end of an entry known to be alive at ``after`` (a binary search over the
        versions since: the sweep reports ends as its leaf saw them)."""
        if self._alive(key, start, self.last):
            return None
        lo, hi = after + 1, self.last          # dead at hi, alive at after
        while lo < hi:
            mid = (lo + hi) // 2
            if self._alive(key, start, mid):
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- state --------------------------------------------------------------------------

    def stats(self) -> dict:
        """Counters since creation: pages in use, page reads and writes, live entries,
        height of the live tree, bytes."""
        if not self.meta["live_known"]:
            self.meta["live"] = sum(1 for _ in self.timeslice(max(self.last, 0)))
            self.meta["live_known"] = True
        s = self.store.stats()
        s.update(live=self.meta["live"], height=self.meta["level"] + 1, versions=self.last)
        return s

    def flush(self) -> None:
        self.store.flush()

    def close(self) -> None:
        if self._own_store:
            self.store.close()
        else:
            self.store.flush()

    # -- invariants ---------------------------------------------------------------------

    def check_paths(self, keys: Iterable[tuple], version: int) -> None:
        """Invariants where a change at ``version`` can have broken them, along the live
        paths to ``keys``: every node on a path within its page and sorted; the live
        entries of each partitioning its range; the weak version condition for every
        live non-root node on or beside a path; the strong one for the nodes the change
        created; a live index root with at least two live children."""
        done: set[int] = set()
        for key in keys:
            path = self._live_path(key)
            root = path[0][1]
            if root.level > 0:
                assert sum(1 for e in root.entries if e[2] is None) >= 2, "live root has one live child"
            for pid, node, lo, hi, start in path:
                if pid in done:
                    continue
                done.add(pid)
                self._check_node(pid, node)
                live = sorted((e for e in node.entries if e[2] is None), key=_order)
                for e in live[node.level > 0:]:
                    assert lo <= e[0] and (hi is None or e[0] < hi), \
                        f"page {pid}: live key {e[0]!r} outside its range [{lo!r}, {hi!r})"
                if node.level == 0:
                    continue
                los = [e[0] for e in live]
                assert all(a < b for a, b in zip(los, los[1:])), f"page {pid}: live children overlap"
                for e in live:
                    child = self.store.get(e[3])
                    assert child.level == node.level - 1, f"page {e[3]}: level {child.level} under {node.level}"
                    w = self._live_weight(child)
                    assert w >= self.cond.weak, f"page {e[3]}: weak version underflow ({w} < {self.cond.weak:.0f})"
                    if e[1] == version:
                        assert self.cond.strong_lo <= w <= self.cond.strong_hi, \
                            f"page {e[3]}: strong version condition broken ({w})"
                        self._check_node(e[3], child)

    def _check_node(self, pid: int, node: Node) -> None:
        size = node.size
        self._resize(node)
        assert node.size == size, f"page {pid}: size {size} recorded, {node.size} counted"
        assert size <= self.cond.capacity, f"page {pid}: {size} bytes over capacity {self.cond.capacity}"
        keys = [_order(e) for e in node.entries]
        assert keys == sorted(keys), f"page {pid}: entries not sorted"
        for e in node.entries:
            assert e[2] is None or e[1] < e[2], f"page {pid}: empty lifespan {e[:3]}"

    def check(self) -> None:
        """Every invariant over the whole DAG (all roots in ``root*``): page sizes and
        order, live keys unique per version in each leaf, and at each version a node's
        alive entries partition its range; then the live paths (see
        :meth:`check_paths`). Cost grows with the whole history: for tests."""
        seen: set[int] = set()
        roots = list(self.roots.range())
        for (start,), raw in roots:
            pid, level = msgpack.unpackb(raw)
            self._check_dag(pid, seen)
        live = [k for k, _ in self.timeslice(max(self.last, 0))]
        assert len(live) == len(set(live)), "a key is live twice"
        if self.meta["live_known"]:
            assert len(live) == self.meta["live"], f"{len(live)} live entries, {self.meta['live']} counted"

    def _check_dag(self, pid: int, seen: set[int]) -> None:
        if pid in seen:
            return
        seen.add(pid)
        node = self.store.get(pid)
        self._check_node(pid, node)
        events = sorted({e[1] for e in node.entries} | {e[2] for e in node.entries if e[2] is not None})
        for t in events:
            alive = [e[0] for e in node.entries if e[1] <= t and (e[2] is None or t < e[2])]
            assert len(alive) == len(set(alive)), f"page {pid}: key alive twice at {t}"
        if node.level > 0:
            for e in node.entries:
                self._check_dag(e[3], seen)
