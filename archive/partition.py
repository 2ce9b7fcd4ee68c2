"""The archive of one source topic partition: every message stored once (its bytes by
message id) and indexed as temporal triples in an MVBT, in the transaction-time
architecture of thesis section 4.1.4 (Fig. 4.13).

Transaction time is the archive's own clock, a tick per change (a message archived, a
retraction), mapped to the Kafka record (timestamp, partition, offset). A message's
archive time is its Kafka timestamp, raised to the previous one's when it is smaller,
so that time and ticks grow together. A tick's changes take MVBT versions
``tick << VERSION_BITS | i``.

* ``values``, an MVBT keyed ``(path, value, tick)``: "messages whose path P had
  value v during [t1, t2]" is a key-time range query over the prefix ``(P, v)``,
  and the messages of a window with P = v a range of ticks inside it;
* ``catalog``, an MVBT keyed ``(source, message id)``: the lifespan of each message in
  the archive; retracting a message ends it, retracting a publisher or an id prefix is a
  range delete over the ids sharing that prefix (section 4.1.4);
* B+-trees from tick to the record's metadata, from message id to its bytes, from offset
  to tick, from archive time to tick, and the distinct paths seen.

>>> p = PartitionArchive(None, "news", 0)
>>> a = p.add(b"<nitf><head><title>Tide</title></head></nitf>", offset=0, timestamp=1000)
>>> a.message_id, a.time
('news-0-0', 1000)
>>> [m.message_id for m in p.lookup("/nitf/head/title", "Tide", 0, 5000)]
['news-0-0']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
from formats import FormatError, Message
from yfilter.errors import MessageError

from archive import defaults
from archive.blobs import Blobs
from archive.bptree import BPlusTree
from archive.errors import ArchiveError, EntryTooLargeError, KeyStateError
from archive.mvbt import MVBT
from archive.pages import PageStore
from archive.triples import triples, value_key

MESSAGE_ID_HEADER = "onyx-message-id"
LAST_TICK = 1 << 62
"""Larger than any tick: the open end of a key range over ticks."""

MESSAGE, RETRACTION = 0, 1
"""What happened at a tick (the ``times`` index keeps both, so that "as of t" sees
retractions)."""

_BITS = defaults.VERSION_BITS


def message_id(source: str, partition: int, offset: int, headers: Iterable[tuple[str, bytes]] = ()) -> str:
    """The id the brokers give a source record (``broker/dataplane/plan.py``): its
    ``onyx-message-id`` header, else ``<source>-<partition>-<offset>``."""
    given = dict(headers or ()).get(MESSAGE_ID_HEADER)
    return given.decode(errors="replace") if given else f"{source}-{partition}-{offset}"


@dataclass(frozen=True)
class Archived:
    """What the archive knows of one source record."""

    tick: int
    message_id: str
    source: str
    partition: int
    offset: int
    timestamp: int
    time: int
    indexed: bool


class PartitionArchive:
    """The archive of ``source``'s partition ``partition`` in ``directory`` (``None``:
    in memory)."""

    def __init__(self, directory: str | os.PathLike | None, source: str, partition: int, *,
                 page_size: int = defaults.ARCHIVE_PAGE_SIZE, buffer_pages: int = defaults.BUFFER_PAGES) -> None:
        self.source, self.partition = source, partition
        self.directory = None if directory is None else Path(directory)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        where = (lambda name: None) if self.directory is None else (lambda name: self.directory / name)
        self.store = PageStore(where("index.pages"), page_size, buffer_pages, durable=True)
        self.blobs = Blobs(where("messages.log"))
        self.meta = self.store.meta.setdefault("partition", {"tick": 0, "time": 0, "offset": -1, "blobs": 0})
        if self.blobs.size() > self.meta["blobs"]:
            self.blobs.truncate(self.meta["blobs"])        # bytes of a batch that was never flushed
        self.values = MVBT(store=self.store, name="values")
        self.catalog = MVBT(store=self.store, name="catalog")
        self.ticks = BPlusTree(self.store, "ticks")
        self.ids = BPlusTree(self.store, "ids")
        self.offsets = BPlusTree(self.store, "offsets")
        self.times = BPlusTree(self.store, "times")
        self.paths = BPlusTree(self.store, "paths")
        self.unindexed = BPlusTree(self.store, "unindexed")

    # -- writing ------------------------------------------------------------------------

    @property
    def last_offset(self) -> int:
        """The highest offset archived (``-1``: none)."""
        return self.meta["offset"]

    def _tick(self) -> int:
        self.meta["tick"] += 1
        return self.meta["tick"]

    def add(self, value: bytes, *, offset: int, timestamp: int, headers: Iterable[tuple[str, bytes]] = ()
            ) -> Archived | None:
        """Archive the record at ``offset`` (``None`` if that offset is archived already,
        so that a replayed batch is harmless). Malformed XML is stored but not indexed."""
        if offset <= self.meta["offset"]:
            return None
        mid = message_id(self.source, self.partition, offset, headers)
        tick = self._tick()
        time = max(int(timestamp), self.meta["time"])
        ref = self.blobs.append(bytes(value))
        base = tick << _BITS
        try:
            stmts = sorted(triples(Message.from_xml(value)))
            indexed = True
        except (FormatError, MessageError, ValueError):
            stmts, indexed = [], False
        key = (self.source, mid)
        try:
            self.catalog.insert(key, base, msgpack.packb(tick))
        except KeyStateError:
            # The same id again (a producer's retry): the newer record supersedes it.
            self.catalog.delete(key, base)
            self.catalog.insert(key, base + 1, msgpack.packb(tick))
        for i, (path, val) in enumerate(stmts, start=1):
            if i >= 1 << _BITS:
                indexed = False
                break
            try:
                self.values.insert((path, val, tick), base + i, b"")
            except EntryTooLargeError:
                indexed = False          # found by a scan of its window instead
                continue
            if self.paths.get((path,)) is None:
                self.paths.insert((path,), b"")
        rec = Archived(tick, mid, self.source, self.partition, offset, int(timestamp), time, indexed)
        self.ticks.insert((tick,), msgpack.packb([mid, offset, int(timestamp), time, indexed, *ref]))
        if self.ids.get((mid,)) is None:
            self.ids.insert((mid,), msgpack.packb(tick))
        else:
            self.ids.update((mid,), msgpack.packb(tick))
        self.offsets.insert((offset,), msgpack.packb(tick))
        self.times.insert((time, tick, MESSAGE), b"")
        if not indexed:
            self.unindexed.insert((tick,), b"")
        self.meta.update(time=time, offset=offset, blobs=self.blobs.size())
        return rec

    def retract(self, message_id: str, at: int | None = None) -> int:
        """Retract one message at time ``at`` (default: the archive's latest time): a
        logical delete, so it stays visible as of earlier times. Returns how many
        messages were retracted (0 if it is not live)."""
        return self._retract((self.source, message_id), (self.source, message_id), at)

    def retract_prefix(self, prefix: str = "", at: int | None = None) -> int:
        """Retract every live message whose id starts with ``prefix`` (all of this
        publisher's with ``""``): one range delete over the catalog's ids sharing the
        prefix, then the messages' triples one by one in the value index, where they do
        not share a key prefix (section 4.1.4)."""
        return self._retract((self.source, prefix), (self.source, prefix + "\U0010ffff"), at)

    def _retract(self, lo: tuple, hi: tuple, at: int | None) -> int:
        v = self.catalog.last
        live = [msgpack.unpackb(val) for _, val, _, _ in self.catalog.range(lo, hi, v, v)] if v >= 0 else []
        if not live:
            return 0
        tick = self._tick()
        time = max(self.meta["time"], at if at is not None else 0)
        base = tick << _BITS
        if lo == hi:
            self.catalog.delete(lo, base)
        else:
            self.catalog.delete_range(lo, hi, base)
        i = 1
        for tick_of in live:
            try:
                stmts = triples(Message.from_xml(self.data(tick_of)))
            except (FormatError, MessageError, ValueError):
                continue
            for path, val in sorted(stmts):
                try:
                    self.values.delete((path, val, tick_of), base + i)
                    i += 1
                except KeyStateError:
                    pass        # never indexed (too large): nothing to end
        self.times.insert((time, tick, RETRACTION), b"")
        self.meta["time"] = time
        return len(live)

    def flush(self) -> None:
        """Make everything archived so far durable (message bytes first, then pages)."""
        self.blobs.flush()
        self.store.flush()

    def close(self) -> None:
        self.blobs.flush()
        self.store.close()
        self.blobs.close()

    # -- reading ------------------------------------------------------------------------

    def read(self, tick: int) -> tuple[Archived, bytes]:
        """The record archived at ``tick`` and its bytes."""
        raw = self.ticks.get((tick,))
        if raw is None:
            raise ArchiveError(f"no record at tick {tick} in {self.source}/{self.partition}")
        mid, offset, ts, time, indexed, at, length = msgpack.unpackb(raw)
        rec = Archived(tick, mid, self.source, self.partition, offset, ts, time, indexed)
        return rec, self.blobs.read((at, length))

    def record(self, tick: int) -> Archived:
        return self.read(tick)[0]

    def message(self, message_id: str) -> bytes | None:
        """The bytes archived under ``message_id`` (the latest record with that id)."""
        raw = self.ids.get((message_id,))
        return None if raw is None else self.read(msgpack.unpackb(raw))[1]

    def data(self, tick: int) -> bytes:
        return self.read(tick)[1]

    def ticks_between(self, t1: int, t2: int) -> tuple[int, int] | None:
        """The first and last tick archived at a time in ``[t1, t2]`` (``None``: none)."""
        first = next(iter(self.times.range((t1,), None)), None)
        if first is None or first[0][0] > t2:
            return None
        last = self.times.floor((t2, LAST_TICK))
        return first[0][1], last[0][1]

    def tick_at(self, t: int) -> int:
        """The last tick archived at or before time ``t`` (0: none)."""
        found = self.times.floor((t, LAST_TICK))
        return 0 if found is None else found[0][1]

    def window(self, t1: int, t2: int) -> Iterator[int]:
        """Every tick whose message was archived at a time in ``[t1, t2]``."""
        for (time, tick, kind), _ in self.times.range((t1,), (t2, LAST_TICK)):
            if kind == MESSAGE:
                yield tick

    def live_at(self, tick_of: int, version: int | None = None) -> bool:
        """Was the message archived at ``tick_of`` in the archive (not retracted) at
        ``version`` (default: now)?"""
        rec = self.record(tick_of)
        v = self.catalog.last if version is None else version
        return any(True for _ in self.catalog.range((self.source, rec.message_id), (self.source, rec.message_id),
                                                     v, v))

    def matching_paths(self, pattern: str) -> list[str]:
        """The archived paths a predicate pattern's path matches (``//`` and ``*`` allowed)."""
        from archive.replay import path_regex

        if "//" not in pattern and "*" not in pattern:
            return [pattern]
        rx = path_regex(pattern)
        return [k[0] for k, _ in self.paths.range() if rx.fullmatch(k[0])]

    def lookup(self, path: str, value: str | float, t1: int, t2: int, as_of: int | None = None
               ) -> list[Archived]:
        """Messages archived at a time in ``[t1, t2]`` with ``path`` = ``value``, as the
        archive knows them ``as_of`` a time (default: now, so retracted ones are left
        out): a range-timeslice query on the value index."""
        return [self.record(t) for t in self.lookup_ticks(path, value, t1, t2, as_of)]

    def lookup_ticks(self, path: str, value: str | float, t1: int, t2: int, as_of: int | None = None) -> set[int]:
        key = value_key(value)
        span = self.ticks_between(t1, t2)
        if key is None or span is None or self.values.last < 0:
            return set()
        v = self.version_as_of(as_of)
        lo, hi = (path, key, span[0]), (path, key, span[1])
        return {k[2] for k, *_ in self.values.range(lo, hi, v, v)}

    def during(self, path: str, value: str | float, t1: int, t2: int) -> list[Archived]:
        """Messages whose ``path`` had ``value`` at some time in ``[t1, t2]``: archived by
        ``t2`` and not retracted before ``t1`` (a key-time range query)."""
        key = value_key(value)
        if key is None or self.values.last < 0:
            return []
        v1, v2 = self.version_as_of(t1), self.version_as_of(t2)
        found = {k[2] for k, *_ in self.values.range((path, key), (path, key, LAST_TICK), v1, v2)}
        return [self.record(t) for t in sorted(found)]

    def version_as_of(self, t: int | None) -> int:
        """The value index's version that shows the archive as of time ``t`` (``None``: now)."""
        if t is None:
            return max(self.values.last, 0)
        return (self.tick_at(t) << _BITS) | ((1 << _BITS) - 1)

    def stats(self) -> dict:
        s = self.store.stats()
        s.update(messages=self.meta["tick"], blob_bytes=self.blobs.size(), live_triples=self.values.stats()["live"])
        return s
