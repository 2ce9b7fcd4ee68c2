"""The variable-length B+-tree (thesis section 4.1.1-4.1.2, XXL's ``BPlusTree`` and
``VariableLengthBPlusTree``; range insert and range delete from section 4.1.4).

Leaves hold ``[key, value]``, index nodes ``[separator, child]`` where the separator is
the largest key of the child's subtree or any key between it and the next child's keys
(XXL's max-key separators: ``n`` pointers and ``n`` separators). Pages overflow and
underflow by bytes: a node holds at most a page's bytes and, unless it is the root, at
least ``min_load`` of them (``b``, default ``B/3``). Splits follow one of the three
strategies of :mod:`archive.split`. Keys are unique composite keys (tuples).

Range scans keep the path on a stack instead of following sibling links, which costs
the same page reads and leaves range insert and range delete no links to fix.

>>> from archive.pages import PageStore
>>> t = BPlusTree(PageStore(None, page_size=256), "t")
>>> for i in range(50):
...     t.insert(("S", i), b"v%d" % i)
>>> [k for k, _ in t.range(("S", 10), ("S", 13))]
[('S', 10), ('S', 11), ('S', 12), ('S', 13)]
>>> t.delete_range(("S", 5), ("S", 44))
>>> len(list(t.range())), t.get(("S", 45))
(10, b'v45')
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator

from archive import defaults
from archive.codec import NODE_OVERHEAD, Node, packed_len, size_of
from archive.errors import ArchiveError, EntryTooLargeError, KeyStateError
from archive.keys import check_key, merge_signature, shortest_between
from archive.pages import PageStore
from archive.split import check_strategy, partition, pieces


def _first(e: list):
    return e[0]


class BPlusTree:
    """A B+-tree named ``name`` in ``store`` (created empty, or reopened from the store's
    metadata)."""

    def __init__(self, store: PageStore, name: str, min_load: float = defaults.MIN_LOAD,
                 split: str = defaults.SPLIT) -> None:
        if not 0 < min_load < 0.5:
            raise ArchiveError(f"min_load must be in (0, 0.5), not {min_load}")
        self.store = store
        self.name = name
        self.split = check_strategy(split)
        self.capacity = store.page_size - NODE_OVERHEAD
        self.min_bytes = min_load * self.capacity
        # An entry must leave room for a split that keeps both halves above min_bytes.
        self.max_entry = int((1 - 2 * min_load) * self.capacity / 2)
        meta = store.meta.get(name)
        if meta is None:
            meta = store.meta[name] = {"root": store.allocate(Node(0)), "height": 1, "sig": "", "zombies": []}
        self.meta = meta

    # -- pages --------------------------------------------------------------------------

    def _node(self, pid: int) -> Node:
        return self.store.get(pid)

    def _put(self, pid: int, node: Node) -> None:
        self.store.put(pid, node)

    def _alloc(self, node: Node) -> int:
        zombies = self.meta["zombies"]
        if zombies:
            # A subtree cut off by a range delete is reclaimed one page at a time.
            pid = zombies.pop()
            old = self._node(pid)
            if old.level > 0:
                zombies.extend(e[1] for e in old.entries)
            self._put(pid, node)
            return pid
        return self.store.allocate(node)

    def _free(self, pid: int) -> None:
        self.store.free(pid)

    def reclaim(self) -> None:
        """Free now every page of the subtrees earlier range deletes cut off."""
        zombies = self.meta["zombies"]
        while zombies:
            pid = zombies.pop()
            node = self._node(pid)
            if node.level > 0:
                zombies.extend(e[1] for e in node.entries)
            self._free(pid)

    def _resize(self, node: Node) -> None:
        node.size = sum(size_of(e[0], e[1]) for e in node.entries)

    @property
    def root(self) -> int:
        return self.meta["root"]

    @property
    def height(self) -> int:
        return self.meta["height"]

    def _check_entry(self, key: tuple, value: bytes) -> int:
        check_key(key)
        if not isinstance(value, (bytes, bytearray)):
            raise ArchiveError(f"a value is bytes, not {type(value).__name__}")
        self.meta["sig"] = merge_signature(self.meta["sig"], key)
        size = size_of(key, bytes(value))
        if size > self.max_entry:
            raise EntryTooLargeError(f"entry of {size} bytes exceeds {self.max_entry} bytes "
                                     f"for {self.store.page_size}-byte pages")
        return size

    # -- search -------------------------------------------------------------------------

    def get(self, key: tuple) -> bytes | None:
        """The value under ``key``, or ``None``."""
        node = self._node(self.root)
        while node.level > 0:
            i = bisect_left(node.entries, key, key=_first)
            if i == len(node.entries):
                return None
            node = self._node(node.entries[i][1])
        i = bisect_left(node.entries, key, key=_first)
        if i < len(node.entries) and node.entries[i][0] == key:
            return node.entries[i][1]
        return None

    def range(self, lo: tuple | None = None, hi: tuple | None = None) -> Iterator[tuple[tuple, bytes]]:
        """``(key, value)`` with ``lo <= key <= hi`` in key order (``None``: unbounded)."""
        stack: list[tuple[Node, int]] = []
        node = self._node(self.root)
        while True:
            if node.level > 0:
                i = 0 if lo is None else bisect_left(node.entries, lo, key=_first)
                if i < len(node.entries):
                    stack.append((node, i))
                    node = self._node(node.entries[i][1])
                    continue
            else:
                i = 0 if lo is None else bisect_left(node.entries, lo, key=_first)
                for e in node.entries[i:]:
                    if hi is not None and e[0] > hi:
                        return
                    yield e[0], e[1]
            # Next child of the deepest ancestor that has one; lo no longer restricts it.
            while stack:
                parent, i = stack.pop()
                if hi is not None and parent.entries[i][0] >= hi:
                    continue
                if i + 1 < len(parent.entries):
                    stack.append((parent, i + 1))
                    node = self._node(parent.entries[i + 1][1])
                    lo = None
                    break
            else:
                return

    def floor(self, key: tuple) -> tuple[tuple, bytes] | None:
        """The entry with the largest key ``<= key``, or ``None``."""
        return self._floor(self._node(self.root), key)

    def _floor(self, node: Node, key: tuple):
        if node.level == 0:
            i = bisect_left(node.entries, key, key=_first)
            if i < len(node.entries) and node.entries[i][0] == key:
                return tuple(node.entries[i])
            return tuple(node.entries[i - 1]) if i > 0 else None
        i = min(bisect_left(node.entries, key, key=_first), len(node.entries) - 1)
        for j in range(i, -1, -1):
            found = self._floor(self._node(node.entries[j][1]), key)
            if found is not None:
                return found
        return None

    def last(self) -> tuple[tuple, bytes] | None:
        """The entry with the largest key, or ``None`` when empty."""
        node = self._node(self.root)
        while node.level > 0:
            node = self._node(node.entries[-1][1])
        return tuple(node.entries[-1]) if node.entries else None

    # -- insert -------------------------------------------------------------------------

    def _descend(self, key: tuple, extend: bool) -> list[tuple[int, Node, int]]:
        """The path ``(pid, node, child index)`` from the root to ``key``'s leaf (index
        ``-1`` at the leaf); with ``extend``, last separators grow to cover ``key``."""
        path = []
        pid = self.root
        node = self._node(pid)
        while node.level > 0:
            i = bisect_left(node.entries, key, key=_first)
            if i == len(node.entries):
                i -= 1
                if extend:
                    e = node.entries[i]
                    node.size += packed_len(key) - packed_len(e[0])
                    e[0] = key
                    self._put(pid, node)
            path.append((pid, node, i))
            pid = node.entries[i][1]
            node = self._node(pid)
        path.append((pid, node, -1))
        return path

    def insert(self, key: tuple, value: bytes) -> None:
        """Add ``key`` (:class:`KeyStateError` if present)."""
        size = self._check_entry(key, value)
        path = self._descend(key, extend=True)
        pid, leaf, _ = path[-1]
        i = bisect_left(leaf.entries, key, key=_first)
        if i < len(leaf.entries) and leaf.entries[i][0] == key:
            raise KeyStateError(f"key {key!r} is already in the tree")
        leaf.entries.insert(i, [key, bytes(value)])
        leaf.size += size
        self._put(pid, leaf)
        self._fix_overflow(path)

    def update(self, key: tuple, value: bytes) -> None:
        """Replace the value under ``key`` (:class:`KeyStateError` if absent)."""
        self._check_entry(key, value)
        path = self._descend(key, extend=False)
        pid, leaf, _ = path[-1]
        i = bisect_left(leaf.entries, key, key=_first)
        if i == len(leaf.entries) or leaf.entries[i][0] != key:
            raise KeyStateError(f"key {key!r} is not in the tree")
        leaf.size += size_of(key, bytes(value)) - size_of(key, leaf.entries[i][1])
        leaf.entries[i][1] = bytes(value)
        self._put(pid, leaf)
        self._fix_overflow(path)

    def _separator(self, left: list, right: list, level: int) -> tuple:
        """The separator stored for ``left`` when ``right`` follows it."""
        if level == 0 and self.split == "prefix":
            s = shortest_between(left[-1][0], right[0][0], upper_inclusive=False)
            return s if s < right[0][0] else left[-1][0]
        return left[-1][0]

    def _cuts(self, node: Node, lo: float, hi: float, target: float | None = None) -> list[int]:
        ents = node.entries
        sizes = [size_of(e[0], e[1]) for e in ents]

        def sep_len(p: int) -> int:
            return packed_len(self._separator(ents[:p], ents[p:p + 1], node.level))

        return partition(sizes, lo, hi, self.split, sep_len, target=target)

    def _split_node(self, node: Node, cuts: list[int]) -> list[Node]:
        parts = pieces(node.entries, cuts)
        out = []
        for part in parts:
            n = Node(node.level, part)
            self._resize(n)
            out.append(n)
        return out

    def _replace(self, path: list, depth: int, parts: list[Node], first_pid: int) -> None:
        """Node ``path[depth]`` (page ``first_pid``) is now ``parts``: write them and put
        their separators into the parent, splitting upward as needed."""
        pids = [first_pid] + [self._alloc(p) for p in parts[1:]]
        self._put(first_pid, parts[0])
        seps = [self._separator(parts[k].entries, parts[k + 1].entries, parts[k].level)
                for k in range(len(parts) - 1)]
        if depth == 0:
            if len(parts) == 1:
                return
            # The root split: a new root above the pieces.
            seps.append(parts[-1].entries[-1][0])
            root = Node(parts[0].level + 1, [[s, p] for s, p in zip(seps, pids)])
            self._resize(root)
            self.meta["root"] = self._alloc(root)
            self.meta["height"] += 1
            self._fix_overflow([(self.meta["root"], root, -1)])
            return
        ppid, parent, i = path[depth - 1]
        old_sep = parent.entries[i][0]
        last_sep = old_sep if old_sep >= parts[-1].entries[-1][0] else parts[-1].entries[-1][0]
        seps.append(last_sep)
        new = [[s, p] for s, p in zip(seps, pids)]
        parent.entries[i:i + 1] = new
        self._resize(parent)
        self._put(ppid, parent)
        if last_sep != old_sep:
            self._raise_separators(path, depth - 1, last_sep)
        if parent.size > self.capacity:
            self._fix_overflow(path[:depth])

    def _raise_separators(self, path: list, depth: int, key: tuple) -> None:
        """Ancestors' separators on ``path`` above ``depth`` grow to at least ``key``."""
        for d in range(depth - 1, -1, -1):
            pid, node, i = path[d]
            if node.entries[i][0] >= key:
                return
            node.entries[i][0] = key
            self._resize(node)
            self._put(pid, node)

    def _fix_overflow(self, path: list) -> None:
        depth = len(path) - 1
        pid, node, _ = path[depth]
        if node.size <= self.capacity:
            return
        cuts = self._cuts(node, self.min_bytes, self.capacity)
        self._replace(path, depth, self._split_node(node, cuts), pid)

    # -- delete -------------------------------------------------------------------------

    def delete(self, key: tuple) -> bytes:
        """Remove ``key`` and return its value (:class:`KeyStateError` if absent)."""
        path = self._descend(key, extend=False)
        pid, leaf, _ = path[-1]
        i = bisect_left(leaf.entries, key, key=_first)
        if i == len(leaf.entries) or leaf.entries[i][0] != key:
            raise KeyStateError(f"key {key!r} is not in the tree")
        e = leaf.entries.pop(i)
        leaf.size -= size_of(e[0], e[1])
        self._put(pid, leaf)
        for depth in range(len(path) - 2, -1, -1):
            ppid, parent, ci = path[depth]
            if not self._fix_child(ppid, parent, ci):
                break
        self._collapse_root()
        return e[1]

    def _underfull(self, node: Node) -> bool:
        return node.size < self.min_bytes

    def _fix_child(self, ppid: int, parent: Node, i: int) -> bool:
        """Merge or rebalance child ``i`` of ``parent`` if it is underfull; True when the
        parent changed."""
        cpid = parent.entries[i][1]
        child = self._node(cpid)
        if not child.entries:
            parent.entries.pop(i)
            self._resize(parent)
            self._put(ppid, parent)
            self._free(cpid)
            return True
        if not self._underfull(child) or len(parent.entries) < 2:
            return False
        j = i + 1 if i + 1 < len(parent.entries) else i - 1
        a, b = min(i, j), max(i, j)
        apid, bpid = parent.entries[a][1], parent.entries[b][1]
        left, right = self._node(apid), self._node(bpid)
        seam = len(left.entries)
        if left.size + right.size <= self.capacity:
            left.entries.extend(right.entries)
            left.size += right.size
            self._put(apid, left)
            parent.entries[a][0] = parent.entries[b][0]
            parent.entries.pop(b)
            self._free(bpid)
            self._resize(parent)
            self._put(ppid, parent)
            if left.level > 0:
                # The pieces met at the seam: either may be an underfull only child.
                for k in (seam, seam - 1):
                    if 0 <= k < len(left.entries):
                        self._fix_child(apid, left, k)
            return True
        both = Node(left.level, left.entries + right.entries)
        self._resize(both)
        cuts = self._cuts(both, self.min_bytes, self.capacity, target=both.size / 2)[:1] or [seam]
        l2, r2 = self._split_node(both, cuts)
        self._put(apid, l2)
        self._put(bpid, r2)
        parent.entries[a][0] = self._separator(l2.entries, r2.entries, l2.level)
        self._resize(parent)
        self._put(ppid, parent)
        return True

    def _collapse_root(self) -> None:
        root = self._node(self.root)
        if root.level > 0 and not root.entries:
            self.meta["height"] = 1
            self._put(self.root, Node(0))
            return
        while root.level > 0 and len(root.entries) == 1:
            old = self.root
            self.meta["root"] = root.entries[0][1]
            self.meta["height"] -= 1
            self._free(old)
            root = self._node(self.root)

    # -- bulk operations ----------------------------------------------------------------

    def _build_level(self, entries: list[list], level: int, fill: float) -> list[tuple[tuple, int, Node]]:
        """Pack ``entries`` into nodes of ``level`` filled to ``fill``; returns
        ``(last key, pid, node)`` per node."""
        limit = max(fill * self.capacity, self.min_bytes)
        nodes: list[Node] = []
        cur = Node(level)
        for e in entries:
            s = size_of(e[0], e[1])
            if cur.entries and cur.size + s > limit:
                nodes.append(cur)
                cur = Node(level)
            cur.entries.append(e)
            cur.size += s
        if cur.entries:
            nodes.append(cur)
        if len(nodes) >= 2 and self._underfull(nodes[-1]):
            # The last page would be underfull: share the last two evenly.
            both = Node(level, nodes[-2].entries + nodes[-1].entries)
            self._resize(both)
            if both.size <= self.capacity:
                nodes[-2:] = [both]
            else:
                cut = self._cuts(both, self.min_bytes, self.capacity, target=both.size / 2)[:1]
                nodes[-2:] = self._split_node(both, cut or [len(nodes[-2].entries)])
        out = []
        for n in nodes:
            out.append((n.entries[-1][0], self._alloc(n), n))
        return out

    def bulk_load(self, items: Iterable[tuple[tuple, bytes]], fill: float = defaults.BULK_FILL) -> None:
        """Build the tree bottom-up from ``items`` sorted by key (section 4.2: from sorted
        leaves, pages filled to ``fill``); the tree must be empty."""
        root = self._node(self.root)
        if root.level > 0 or root.entries:
            raise ArchiveError("bulk_load needs an empty tree; use insert_range")
        entries = self._sorted_entries(items)
        if not entries:
            return
        self._free(self.root)
        level_nodes = self._build_level(entries, 0, fill)
        level = 0
        while len(level_nodes) > 1:
            level += 1
            level_nodes = self._build_level([[k, p] for k, p, _ in level_nodes], level, fill)
        self.meta["root"] = level_nodes[0][1]
        self.meta["height"] = level + 1

    def _sorted_entries(self, items: Iterable[tuple[tuple, bytes]]) -> list[list]:
        entries = []
        prev = None
        for key, value in items:
            self._check_entry(key, value)
            if prev is not None and not prev < key:
                raise ArchiveError(f"keys must be sorted and distinct: {key!r} after {prev!r}")
            entries.append([key, bytes(value)])
            prev = key
        return entries

    def insert_range(self, items: Iterable[tuple[tuple, bytes]], fill: float = defaults.RANGE_FILL) -> None:
        """Range insert (section 4.1.4): ``items`` sorted by key, none of whose range is in
        the tree yet. The leaf the range falls into is cut at the range and bulk-loaded
        together with it into pages filled to ``fill``; the new pages are attached to the
        leaf's parent, which splits (n-way) upward as needed. O(log n + r/B) pages."""
        entries = self._sorted_entries(items)
        if not entries:
            return
        kmin, kmax = entries[0][0], entries[-1][0]
        for key, _ in self.range(kmin, kmax):
            raise KeyStateError(f"range insert over [{kmin!r}, {kmax!r}] meets key {key!r} already in the tree")
        path = self._descend(kmin, extend=False)
        pid, leaf, _ = path[-1]
        i = bisect_left(leaf.entries, kmin, key=_first)
        merged = leaf.entries[:i] + entries + leaf.entries[i:]
        node = Node(0, merged)
        self._resize(node)
        target = max(fill * self.capacity, (self.min_bytes + self.capacity) / 2)
        cuts = partition([size_of(e[0], e[1]) for e in merged], self.min_bytes, self.capacity,
                         "simple", target=target) if node.size > self.capacity else []
        self._replace(path, len(path) - 1, self._split_node(node, cuts), pid)

    def delete_range(self, lo: tuple, hi: tuple) -> None:
        """Range delete (section 4.1.4): every key in ``[lo, hi]``. Subtrees inside the
        range are cut off without being read (their pages are reclaimed later, see
        :meth:`reclaim`); the two boundary paths are trimmed and repaired bottom-up.
        O(log_b(n/r) + 2 log_b r) pages."""
        if hi < lo:
            raise ArchiveError(f"empty key range [{lo!r}, {hi!r}]")
        self._delete_range(self.root, self._node(self.root), lo, hi)
        self._collapse_root()

    def _delete_range(self, pid: int, node: Node, lo: tuple, hi: tuple) -> None:
        if node.level == 0:
            keep = [e for e in node.entries if not lo <= e[0] <= hi]
            if len(keep) != len(node.entries):
                node.entries = keep
                self._resize(node)
                self._put(pid, node)
            return
        ents = node.entries
        i = bisect_left(ents, lo, key=_first)
        if i == len(ents):
            return
        j = min(bisect_left(ents, hi, key=_first), len(ents) - 1)
        if j - i > 1:
            # Children strictly between the two boundary children lie inside [lo, hi].
            self.meta["zombies"].extend(e[1] for e in ents[i + 1:j])
            del ents[i + 1:j]
            j = i + 1
            self._resize(node)
            self._put(pid, node)
        for c in sorted({i, j}, reverse=True):
            self._delete_range(ents[c][1], self._node(ents[c][1]), lo, hi)
        # Repair the two boundary children (and what a repair moves next to them) until
        # none is empty or underfull; each round merges or rebalances, so it ends.
        for _ in range(8):
            if not any(self._fix_child(pid, node, c)
                       for c in range(min(i + 1, len(node.entries) - 1), max(i - 2, -1), -1)):
                break

    # -- invariants ---------------------------------------------------------------------

    def check(self) -> int:
        """Verify every invariant (sorted unique keys, separators bounding their subtrees,
        all leaves at one depth, every page within its bytes and, but for the root, at
        least ``min_load`` full); returns the number of entries. Raises AssertionError."""
        count, depth = self._check(self.root, None, None, True)
        assert depth == self.height, f"height {self.height} but leaves at depth {depth}"
        return count

    def _check(self, pid: int, lo, hi, is_root: bool) -> tuple[int, int]:
        node = self._node(pid)
        size = sum(size_of(e[0], e[1]) for e in node.entries)
        assert size == node.size, f"page {pid}: size {node.size} recorded, {size} counted"
        assert size <= self.capacity, f"page {pid}: {size} bytes over the capacity {self.capacity}"
        if not is_root:
            assert node.entries, f"page {pid} is empty"
            assert size >= self.min_bytes, f"page {pid}: {size} bytes under the minimum {self.min_bytes:.0f}"
        keys = [e[0] for e in node.entries]
        assert all(a < b for a, b in zip(keys, keys[1:])), f"page {pid}: keys not sorted and distinct"
        if keys:
            assert lo is None or keys[0] > lo, f"page {pid}: key {keys[0]!r} not above its lower bound {lo!r}"
            if node.level == 0:
                assert hi is None or keys[-1] <= hi, f"page {pid}: key {keys[-1]!r} above separator {hi!r}"
        if node.level == 0:
            return len(keys), 1
        if is_root:
            assert len(node.entries) >= 2, "an index root has at least two children"
        total, depths = 0, set()
        prev = lo
        for e in node.entries:
            assert hi is None or e[0] <= hi, f"page {pid}: separator {e[0]!r} above the parent's {hi!r}"
            n, d = self._check(e[1], prev, e[0], False)
            child = self._node(e[1])
            assert child.level == node.level - 1, f"page {e[1]}: level {child.level} under level {node.level}"
            total += n
            depths.add(d)
            prev = e[0]
        assert len(depths) == 1, f"page {pid}: leaves at depths {depths}"
        return total, depths.pop() + 1
