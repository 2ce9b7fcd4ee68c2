"""The page store: counters, buffer, files."""

from __future__ import annotations

import pytest

from archive import PageStore
from archive.codec import Node
from archive.errors import StorageError


def test_without_a_buffer_every_access_is_counted():
    s = PageStore(None, page_size=256, buffer_pages=0)
    pid = s.allocate(Node(0, [[("k",), b"v"]]))
    for _ in range(3):
        s.get(pid)
    assert (s.reads, s.writes) == (3, 1)


def test_the_lru_buffer_saves_reads_and_writes_on_eviction():
    s = PageStore(None, page_size=256, buffer_pages=2)
    pids = [s.allocate(Node(0)) for _ in range(3)]           # the first is evicted: one write
    assert (s.reads, s.writes) == (0, 1)
    s.get(pids[2]), s.get(pids[1])
    assert s.reads == 0
    s.get(pids[0])                                          # a miss; evicts pids[2] (dirty)
    assert (s.reads, s.writes) == (1, 2)


def test_file_round_trip_and_wrong_files(tmp_path):
    path = tmp_path / "p"
    s = PageStore(path, page_size=512, buffer_pages=1)
    pids = [s.allocate(Node(0, [[("k", i), b"x" * i]])) for i in range(20)]
    s.meta["mine"] = {"root": pids[3]}
    s.free(pids[5])
    s.close()
    s = PageStore(path, page_size=512)
    assert s.get(pids[7]).entries == [[("k", 7), b"x" * 7]] and s.meta["mine"] == {"root": pids[3]}
    assert s.allocate(Node(0)) == pids[5]                   # freed pages are reused
    with pytest.raises(StorageError, match="512-byte pages"):
        PageStore(path, page_size=1024)
    (tmp_path / "junk").write_bytes(b"not an archive" * 100)
    with pytest.raises(StorageError, match="not an archive"):
        PageStore(tmp_path / "junk", page_size=512)
