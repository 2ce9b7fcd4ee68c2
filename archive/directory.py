"""The archive of Onyx: one :class:`~archive.partition.PartitionArchive` per source topic
partition under a directory (``<root>/<source>/<partition>/``), so that writers scale
with Kafka partitions, and the questions asked across them: replay, time slices,
key-time queries, retraction, "who received message M", backfill up to a seam.

>>> a = Archive(None)
>>> _ = a.add("news", 0, 0, 1000, b"<nitf><head><title>Tide</title></head></nitf>")
>>> _ = a.add("news", 1, 0, 1500, b"<nitf><head><title>Rain</title></head></nitf>")
>>> [r.record.message_id for r in a.replay("/nitf/head[title = 'Tide']", 0, 2000)]
['news-0-0']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from msgpack import unpackb
from yfilter import Engine

from archive.partition import Archived, PartitionArchive
from archive.profiles import ProfileHistory
from archive.replay import Replayed, replay


class Archive:
    """Partition archives under ``root`` (``None``: in memory), opened on first use."""

    def __init__(self, root: str | os.PathLike | None, **options) -> None:
        self.root = None if root is None else Path(root)
        self.options = options
        self._parts: dict[tuple[str, int], PartitionArchive] = {}
        if self.root is not None and self.root.is_dir():
            # Folders starting with "_" are not sources (the profile lifetimes, ``_profiles``).
            for src in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("_")):
                for part in sorted(p for p in src.iterdir() if p.is_dir() and p.name.isdigit()):
                    self.partition(src.name, int(part.name))

    def partition(self, source: str, partition: int) -> PartitionArchive:
        key = (source, partition)
        if key not in self._parts:
            where = None if self.root is None else self.root / source / str(partition)
            self._parts[key] = PartitionArchive(where, source, partition, **self.options)
        return self._parts[key]

    def partitions(self, source: str | None = None) -> list[PartitionArchive]:
        return [p for (s, _), p in sorted(self._parts.items()) if source is None or s == source]

    def add(self, source: str, partition: int, offset: int, timestamp: int, value: bytes,
            headers: Iterable[tuple[str, bytes]] = ()) -> Archived | None:
        """Archive one source record (``None`` if its offset is archived already)."""
        return self.partition(source, partition).add(value, offset=offset, timestamp=timestamp, headers=headers)

    def replay(self, profile: str, t1: int, t2: int, *, source: str | None = None, as_of: int | None = None,
               namespaces: Mapping[str, str] | None = None, progress: Callable[[int, int], None] | None = None,
               use_index: bool = True) -> Iterator[Replayed]:
        """What ``profile`` would have matched among the messages archived in ``[t1, t2]``
        (see :func:`archive.replay.replay`)."""
        return replay(self.partitions(source), profile, t1, t2, as_of=as_of, namespaces=namespaces,
                      progress=progress, use_index=use_index)

    def backfill(self, profile: str, since: int, seam: Mapping[tuple[str, int], int], *,
                 namespaces: Mapping[str, str] | None = None) -> list[Replayed]:
        """A new subscriber's matches from time ``since`` up to the seam where its live
        deliveries start: per ``(source, partition)``, the records below the seam offset
        (live deliveries take the seam offset and after), de-duplicated by message id."""
        out: dict[str, Replayed] = {}
        for (source, partition), stop in seam.items():
            part = self._parts.get((source, partition))
            if part is None:
                continue
            for r in replay([part], profile, since, part.meta["time"], namespaces=namespaces):
                if r.record.offset < stop:
                    out.setdefault(r.record.message_id, r)
        return sorted(out.values(), key=lambda r: (r.record.time, r.record.source, r.record.partition,
                                                   r.record.offset))

    def messages_at(self, at: int, path: str | None = None, value: str | float | None = None) -> list[Archived]:
        """The messages in the archive at time ``at`` (archived by then, not yet
        retracted), with ``path`` = ``value`` if given (timeslice / range-timeslice)."""
        out = []
        for part in self.partitions():
            if path is None:
                v = part.version_as_of(at)
                if part.catalog.last >= 0:
                    out += [part.record(unpackb(val)) for _, val in part.catalog.timeslice(min(v, part.catalog.last))]
            else:
                out += part.during(path, value, at, at)
        return sorted(out, key=lambda r: (r.time, r.source, r.partition, r.offset))

    def messages_during(self, path: str, value: str | float, t1: int, t2: int) -> list[Archived]:
        """Messages whose ``path`` had ``value`` at some time in ``[t1, t2]`` (key-time)."""
        out = [r for part in self.partitions() for r in part.during(path, value, t1, t2)]
        return sorted(out, key=lambda r: (r.time, r.source, r.partition, r.offset))

    def find(self, message_id: str) -> tuple[PartitionArchive, Archived] | None:
        for part in self.partitions():
            raw = part.ids.get((message_id,))
            if raw is not None:
                return part, part.record(unpackb(raw))
        return None

    def received(self, message_id: str, profiles: ProfileHistory) -> set[str]:
        """Who received message ``message_id``: the profiles active at its archive time
        (an RI-tree query) whose text then matches it."""
        found = self.find(message_id)
        if found is None:
            return set()
        part, rec = found
        active = profiles.active(rec.time)
        if not active:
            return set()
        engine = Engine()
        engine.add_many(active)
        try:
            return set(engine.match(part.data(rec.tick)))
        except ValueError:
            return set()

    def retract(self, message_id: str, at: int | None = None) -> int:
        found = self.find(message_id)
        return 0 if found is None else found[0].retract(message_id, at)

    def retract_prefix(self, source: str, prefix: str = "", at: int | None = None) -> int:
        return sum(p.retract_prefix(prefix, at) for p in self.partitions(source))

    def flush(self) -> None:
        for p in self._parts.values():
            p.flush()

    def close(self) -> None:
        for p in self._parts.values():
            p.close()
        self._parts.clear()
