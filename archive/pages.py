"""The page store: fixed-size pages on a file (the embedded default) or in memory, under
an LRU buffer of N pages that counts page reads and writes (thesis section 4.1: XXL's
``BlockFileContainer`` under a buffer; section 4.2 measures page accesses).

A read is counted when a page is not in the buffer; a write when a modified page leaves
the buffer (or, with no buffer, each time it is modified). Page 0 holds the structures'
metadata; freed pages are reused. Several structures share one store, each under its
own name in the metadata.

A ``durable`` store (the archive's: a writer may be killed at any moment) survives a crash
between two flushes: a modified page stays in the buffer until :meth:`PageStore.flush`,
which first writes every modified page and the metadata to a journal beside the file
(``<path>.journal``, checksummed, synced), then in place, then deletes the journal.
Opening the store replays a complete journal (the crash came while the pages were
written in place) and drops an incomplete one (it came before: the file is still as the
previous flush left it).

>>> s = PageStore(None, page_size=256, buffer_pages=0)
>>> pid = s.allocate(Node(0, [[("k",), b"v"]], size=20))
>>> s.get(pid).entries, s.stats()["page_reads"], s.stats()["page_writes"]
([[('k',), b'v']], 1, 1)
"""

from __future__ import annotations

import os
import zlib
from collections import OrderedDict
from pathlib import Path

import msgpack

from archive import defaults
from archive.codec import Node, decode, encode
from archive.errors import StorageError

MAGIC = b"ONYXARC1"
JOURNAL_MAGIC = b"ONYXJRN1"


class PageStore:
    """Pages of ``page_size`` bytes in ``path`` (``None``: in memory) behind an LRU
    buffer of ``buffer_pages`` pages; ``durable``: crash-safe flushes (see the module
    docstring), for which modified pages stay buffered until the flush."""

    def __init__(self, path: str | os.PathLike | None = None, page_size: int = defaults.PAGE_SIZE,
                 buffer_pages: int = defaults.BUFFER_PAGES, *, durable: bool = False) -> None:
        if page_size < 128:
            raise StorageError(f"page size {page_size} is below 128 bytes")
        self.page_size = page_size
        self.buffer_pages = buffer_pages
        self.path = None if path is None else Path(path)
        self.durable = durable and self.path is not None
        self._buffer: OrderedDict[int, Node] = OrderedDict()   # pid -> node, LRU order
        self._dirty: set[int] = set()
        self._pinned: dict[int, Node] = {}                     # a durable store's modified pages
        self._mem: dict[int, Node] = {}                         # the memory store's pages
        self.reads = self.writes = 0
        self.meta: dict = {"next": 1, "free": []}
        self._written_meta = b""    # the metadata as the file has it: a reader never writes
        self._file = None
        if self.path is not None:
            self._open_file()

    # -- file ---------------------------------------------------------------------------

    @property
    def journal(self) -> Path:
        return Path(f"{self.path}.journal")

    def _open_file(self) -> None:
        if self.journal.exists():
            self._recover()
        exists = self.path.exists() and self.path.stat().st_size > 0
        self._file = open(self.path, "r+b" if exists else "w+b")  # noqa: SIM115 - kept open
        if exists:
            head = self._file.read(self.page_size)
            if not head.startswith(MAGIC):
                raise StorageError(f"{self.path} is not an archive page file")
            size = int.from_bytes(head[8:12], "little")
            if size != self.page_size:
                raise StorageError(f"{self.path} has {size}-byte pages, not {self.page_size}")
            length = int.from_bytes(head[12:16], "little")
            self.meta = msgpack.unpackb(head[16:16 + length], raw=False, strict_map_key=False)
            extra = self.meta.pop("_more", 0)
            if extra:   # metadata longer than page 0 continues at the end of the file
                self._file.seek(extra)
                self.meta = msgpack.unpackb(self._file.read(), raw=False, strict_map_key=False)
            self._written_meta = msgpack.packb(self.meta, use_bin_type=True)
        else:
            self._write_meta()

    def _write_meta(self) -> None:
        body = msgpack.packb(self.meta, use_bin_type=True)
        if body == self._written_meta:
            return
        self._written_meta = body
        if 16 + len(body) > self.page_size:
            where = self.meta["next"] * self.page_size
            self._file.seek(where)
            self._file.write(body)
            self._file.truncate()
            body = msgpack.packb({"_more": where}, use_bin_type=True)
        else:
            self._file.truncate(max(self.meta["next"], 1) * self.page_size)
        self._file.seek(0)
        self._file.write(MAGIC + self.page_size.to_bytes(4, "little") + len(body).to_bytes(4, "little") + body)

    def _recover(self) -> None:
        """Finish the flush a crash interrupted (a complete journal), or forget it."""
        raw = self.journal.read_bytes()
        body = raw[len(JOURNAL_MAGIC) + 4:]
        whole = (raw.startswith(JOURNAL_MAGIC) and len(raw) > len(JOURNAL_MAGIC) + 4
                 and int.from_bytes(raw[len(JOURNAL_MAGIC):len(JOURNAL_MAGIC) + 4], "little") == zlib.crc32(body))
        if whole:
            pages, meta = msgpack.unpackb(body, raw=False, strict_map_key=False)
            mode = "r+b" if self.path.exists() else "w+b"
            with open(self.path, mode) as f:
                self._file = f
                for pid, data in pages:
                    f.seek(pid * self.page_size)
                    f.write(data)
                self.meta = meta
                self._written_meta = b""
                self._write_meta()
                f.flush()
                os.fsync(f.fileno())
            self._file = None
        self.journal.unlink()

    def _load(self, pid: int) -> Node:
        if self._file is None:
            try:
                return self._mem[pid]
            except KeyError:
                raise StorageError(f"page {pid} does not exist") from None
        self._file.seek(pid * self.page_size)
        page = self._file.read(self.page_size)
        length = int.from_bytes(page[:4], "little")
        return decode(page[4:4 + length], self.page_size)

    def _page(self, pid: int, node: Node) -> bytes:
        data = encode(node)
        data = len(data).to_bytes(4, "little") + data
        if len(data) > self.page_size:
            raise StorageError(f"page {pid} encodes to {len(data)} bytes, more than a page ({self.page_size})")
        return data.ljust(self.page_size, b"\0")

    def _store(self, pid: int, node: Node, data: bytes | None = None) -> None:
        self.writes += 1
        if self._file is None:
            self._mem[pid] = node
            return
        self._file.seek(pid * self.page_size)
        self._file.write(data if data is not None else self._page(pid, node))

    # -- buffer ---------------------------------------------------------------------------

    def get(self, pid: int) -> Node:
        """The node on page ``pid`` (a page read unless it is in the buffer)."""
        node = self._buffer.get(pid)
        if node is not None:
            self._buffer.move_to_end(pid)
            return node
        node = self._pinned.get(pid)
        if node is not None:
            return node
        self.reads += 1
        node = self._load(pid)
        self._admit(pid, node)
        return node

    def _admit(self, pid: int, node: Node) -> None:
        if self.buffer_pages <= 0:
            return
        self._buffer[pid] = node
        while len(self._buffer) > self.buffer_pages:
            old, old_node = self._buffer.popitem(last=False)
            if old in self._dirty:
                self._dirty.discard(old)
                self._store(old, old_node)

    def put(self, pid: int, node: Node) -> None:
        """``node`` is page ``pid``'s new content (written when it leaves the buffer)."""
        if self.durable:   # kept apart, out of the LRU, until the flush writes it
            self._buffer.pop(pid, None)
            self._pinned[pid] = node
            return
        if self.buffer_pages <= 0:
            self._store(pid, node)
            return
        if pid in self._buffer:
            self._buffer[pid] = node
            self._buffer.move_to_end(pid)
        else:
            self._admit(pid, node)
        self._dirty.add(pid)

    def allocate(self, node: Node) -> int:
        """A page for ``node`` (a freed one if any)."""
        free = self.meta["free"]
        if free:
            pid = free.pop()
        else:
            pid = self.meta["next"]
            self.meta["next"] += 1
        self.put(pid, node)
        return pid

    def free(self, pid: int) -> None:
        self._buffer.pop(pid, None)
        self._pinned.pop(pid, None)
        self._dirty.discard(pid)
        self._mem.pop(pid, None)
        self.meta["free"].append(pid)

    # -- state --------------------------------------------------------------------------

    def flush(self) -> None:
        """Write every modified page and the metadata (the file is then complete; for a
        durable store, through the journal)."""
        if self.durable:
            pages = [(pid, self._page(pid, self._pinned[pid])) for pid in sorted(self._pinned)]
            if pages or msgpack.packb(self.meta, use_bin_type=True) != self._written_meta:
                body = msgpack.packb([pages, self.meta], use_bin_type=True)
                with open(self.journal, "wb") as j:
                    j.write(JOURNAL_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body)
                    j.flush()
                    os.fsync(j.fileno())
            for pid, data in pages:
                self._store(pid, self._pinned[pid], data)
                self._admit(pid, self._pinned[pid])
            self._pinned.clear()
        for pid in sorted(self._dirty):
            self._store(pid, self._buffer[pid])
        self._dirty.clear()
        if self._file is not None:
            self._write_meta()
            self._file.flush()
            if self.durable:
                os.fsync(self._file.fileno())
                self.journal.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def pages(self) -> int:
        """Pages in use (allocated and not freed)."""
        return self.meta["next"] - 1 - len(self.meta["free"])

    def stats(self) -> dict:
        return {"pages": self.pages(), "page_reads": self.reads, "page_writes": self.writes,
                "bytes": self.pages() * self.page_size}

    def reset_counters(self) -> None:
        self.reads = self.writes = 0

    def drop_buffer(self) -> None:
        """Write and forget every buffered page (a cold buffer, for measurements)."""
        for pid in sorted(self._dirty):
            self._store(pid, self._buffer[pid])
        self._dirty.clear()
        self._buffer.clear()
