"""A timed source over the archive (``archive/``): the semantic cache in front of replay,
as Onyx's query service over recent messages.

``source(concept, condition, window)`` replays the profile ``concept[condition]`` over the
messages archived in the window (the archive's index finds the candidates, the engine
verifies them) and answers ``(message id, message bytes, archive time)``; items are whole
messages, and a message belongs to ``concept[condition]`` when one of its ``concept``
elements satisfies the condition. A region is complete for its window as long as no
message is archived into that window later: windows should end at or before
:meth:`ArchiveSource.settled`.

>>> from archive.directory import Archive
>>> from cache import SemanticCache
>>> archive = Archive(None)
>>> for offset, area in enumerate(["SF", "NY", "SF"]):
...     xml = f"<nitf><head><pubdata edition.area='{area}'/></head></nitf>".encode()
...     _ = archive.add("news", 0, offset, 1000 * (offset + 1), xml)
>>> source = ArchiveSource(archive, "news")
>>> cache = SemanticCache(source, timed=True)
>>> sorted(cache.query("/nitf/head/pubdata", "@edition.area = 'SF'", window=(0, source.settled())).items)
['news-0-0']
>>> source.settled()
2999
"""

from __future__ import annotations

from collections.abc import Iterator

from archive.directory import Archive

from cache.window import Window


class ArchiveSource:
    """The messages of ``source`` (every source: ``None``) in ``archive``."""

    def __init__(self, archive: Archive, source: str | None = None) -> None:
        self.archive, self.source = archive, source

    def __call__(self, concept: str, condition: str, window: Window) -> Iterator[tuple[str, bytes, float]]:
        first, last = window.closed_integers()
        for r in self.archive.replay(f"{concept}[{condition}]", first, last, source=self.source):
            yield r.record.message_id, r.data, float(r.record.time)

    def settled(self) -> int | None:
        """The last archive time no message can still be archived at: a partition's next
        message takes at least that partition's latest time, so one less than the
        smallest latest time over the partitions (``None``: nothing archived)."""
        latest = [part.meta["time"] for part in self.archive.partitions(self.source) if part.meta["tick"]]
        return min(latest) - 1 if latest else None
