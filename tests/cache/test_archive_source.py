"""The cache in front of the archive: over the last minutes, the messages the engine
finds in the archived window, exactly; asked again, from the cache."""

from __future__ import annotations

import random

from lxml import etree

from archive.directory import Archive
from cache import SemanticCache, Window
from cache.archive_source import ArchiveSource

AREAS, SECTIONS = ["SF", "NY", "LA"], ["front", "sport", "world"]


def archived(n: int) -> tuple[Archive, dict[str, tuple[bytes, int]]]:
    rng = random.Random(7)
    archive, messages = Archive(None), {}
    for i in range(n):
        pubdata = "".join(f"<pubdata edition.area='{rng.choice(AREAS)}' position.sequence='{rng.randint(1, 40)}'/>"
                          for _ in range(rng.choice([1, 1, 2])))
        xml = (f"<nitf><head><title>{rng.choice(['storm', 'rally', 'vote'])} news</title>{pubdata}</head>"
               f"<body><p>{rng.choice(SECTIONS)}</p></body></nitf>").encode()
        rec = archive.add("news", i % 2, i // 2, 1_000 * i, xml)
        messages[rec.message_id] = (xml, rec.time)
    return archive, messages


def expected(messages, concept: str, condition: str, first: float, last: float) -> list[str]:
    return sorted(k for k, (xml, t) in messages.items()
                  if first <= t <= last and etree.fromstring(xml).xpath(f"boolean({concept}[{condition}])"))


def test_the_last_minutes_exactly_and_the_second_time_from_the_cache():
    archive, messages = archived(240)
    source = ArchiveSource(archive, "news")
    cache = SemanticCache(source, timed=True)
    end = source.settled()
    assert end == 237_999                                  # partition 0 ends at 238 s (partition 1 at 239 s)
    window = (end - 60_000, end)                           # the last minute
    for concept, condition in [("/nitf/head/pubdata", "@edition.area = 'SF' and @position.sequence <= 20"),
                               ("/nitf", "contains(head/title, 'storm') or body/p = 'sport'")]:
        first = cache.query(concept, condition, window)
        assert sorted(first.items) == expected(messages, concept, condition, *window)
        assert sorted(first.items) == sorted(r.record.message_id for r in archive.replay(
            f"{concept}[{condition}]", *window, source="news"))
        again = cache.query(concept, condition, window)
        assert sorted(again.items) == sorted(first.items) and again.remainder is None and again.from_source == 0
    narrower = cache.query("/nitf/head/pubdata", "@edition.area = 'SF' and @position.sequence <= 10",
                           (end - 30_000, end))
    assert narrower.remainder is None
    assert sorted(narrower.items) == expected(messages, "/nitf/head/pubdata",
                                              "@edition.area = 'SF' and @position.sequence <= 10", end - 30_000, end)


def test_a_sliding_window_fetches_only_the_new_part():
    archive, messages = archived(200)
    source = ArchiveSource(archive, "news")
    cache = SemanticCache(source, timed=True)
    condition = "@edition.area = 'NY'"
    cache.query("/nitf/head/pubdata", condition, (100_000, 150_000))
    r = cache.query("/nitf/head/pubdata", condition, (120_000, 180_000))
    assert r.remainder_parts == [(condition, Window(150_000, 180_000, lo_open=True))]
    assert sorted(r.items) == expected(messages, "/nitf/head/pubdata", condition, 120_000, 180_000)
    assert r.from_cache == len(expected(messages, "/nitf/head/pubdata", condition, 120_000, 150_000))
