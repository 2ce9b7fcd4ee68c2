"""A durable page store survives a crash at any moment: a flush interrupted after its
journal is finished on open, one interrupted before leaves the previous flush; and the
archive writer's code, killed with SIGKILL again and again while it archives, always
reopens to exactly what its last flush held, and goes on from there."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from archive.bptree import BPlusTree
from archive.directory import Archive
from archive.pages import PageStore
from yfilter.generators import DocGenerator, Schema


def _tree(path):
    store = PageStore(path, page_size=512, buffer_pages=4, durable=True)
    return store, BPlusTree(store, "t")


def _two_batches(path):
    """A tree with one flushed batch of keys and a second one not flushed yet."""
    store, tree = _tree(path)
    for i in range(200):
        tree.insert((i,), b"x" * 20)
    store.flush()
    for i in range(200, 400):
        tree.insert((i,), b"y" * 20)
    return store


def test_a_flush_cut_after_its_journal_is_finished_when_the_store_opens(tmp_path, monkeypatch):
    path = tmp_path / "t.pages"
    store = _two_batches(path)

    def killed(*_):
        raise KeyboardInterrupt("killed while writing pages in place")

    monkeypatch.setattr(PageStore, "_store", killed)
    with pytest.raises(KeyboardInterrupt):
        store.flush()
    monkeypatch.undo()
    assert path.with_name("t.pages.journal").exists()
    store2, tree2 = _tree(path)
    assert [k[0] for k, _ in tree2.range()] == list(range(400))
    assert not path.with_name("t.pages.journal").exists()
    tree2.check()


def test_a_flush_cut_before_its_journal_is_complete_leaves_the_previous_one(tmp_path):
    path = tmp_path / "t.pages"
    _two_batches(path).flush()
    # A journal cut short (the crash came while it was written): ignored.
    path.with_name("t.pages.journal").write_bytes(b"ONYXJRN1\x00\x00\x00\x00garbage")
    store2, tree2 = _tree(path)
    assert [k[0] for k, _ in tree2.range()] == list(range(400))


WRITER = textwrap.dedent("""
    import sys
    from archive.writer import archive_rows
    from yfilter.generators import DocGenerator, Schema
    root, start = sys.argv[1], int(sys.argv[2])
    gen = DocGenerator(Schema.nitf(), doc_depth=5, max_repeats=2, seed=5)
    docs = [gen.generate() for _ in range(50)]
    offset = start
    while True:          # batches of 7 records, as the archive writer's micro-batches
        rows = [{"topic": "onyx.src.news", "partition": 0, "offset": o, "ts_ms": 1000 + o, "key": None,
                 "value": docs[o % 50], "headers": []} for o in range(offset, offset + 7)]
        archive_rows(root, rows)
        offset += 7
        print(offset, flush=True)
""")


def test_the_archive_killed_mid_batch_reopens_to_its_last_flush(tmp_path):
    gen = DocGenerator(Schema.nitf(), doc_depth=5, max_repeats=2, seed=5)
    docs = [gen.generate() for _ in range(50)]
    root = tmp_path / "archive"
    rng = random.Random(8)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    for cycle in range(6):
        a = Archive(root)
        last = a.partitions("news")[0].last_offset if a.partitions("news") else -1
        a.close()
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(last + 1)], env=env,
                                stdout=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.5, 3.0))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        a = Archive(root)
        part = a.partitions("news")[0]
        n = part.last_offset + 1
        assert n > last + 1, f"cycle {cycle}: nothing archived"
        assert part.meta["tick"] == n                       # one tick per record, none lost or doubled
        for o in rng.sample(range(n), 20):
            assert part.message(f"news-0-{o}") == docs[o % 50]
        # Replay through the index agrees with a scan of the whole window.
        profile = "/nitf/head/pubdata[@edition.area = 'SF']"
        got = [r.record.offset for r in a.replay(profile, 0, 10**9)]
        assert got == [r.record.offset for r in a.replay(profile, 0, 10**9, use_index=False)]
        part.values.check()
        a.close()
