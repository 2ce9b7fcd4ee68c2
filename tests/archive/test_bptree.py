"""The variable-length B+-tree against a dict: inserts, deletes, range inserts and range
deletes in random interleavings, every invariant checked after every change, for the
three split strategies, in memory and on a file."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive import BPlusTree, PageStore
from archive.errors import ArchiveError, EntryTooLargeError, KeyStateError


def _run(t: BPlusTree, ops, ref: dict) -> None:
    for op, a, n in ops:
        key = ("k", a)
        if op == "i":
            if key in ref:
                with pytest.raises(KeyStateError):
                    t.insert(key, b"again")
            else:
                t.insert(key, b"%d" % a)
                ref[key] = b"%d" % a
        elif op == "d" and key in ref:
            assert t.delete(key) == ref.pop(key)
        elif op == "D":
            t.delete_range(key, ("k", a + n))
            for k in [k for k in ref if key <= k <= ("k", a + n)]:
                del ref[k]
        elif op == "R" and not any(key <= k <= ("k", a + n) for k in ref):
            items = [(("k", x), b"r%d" % x) for x in range(a, a + n + 1)]
            t.insert_range(items)
            ref.update(items)
        assert t.check() == len(ref)


OPS = st.lists(st.tuples(st.sampled_from("iiiddDR"), st.integers(0, 300), st.integers(0, 40)), min_size=30, max_size=200)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, split=st.sampled_from(["simple", "shortest", "prefix"]))
def test_random_changes_match_a_dict(ops, split):
    t = BPlusTree(PageStore(None, page_size=256, buffer_pages=4), "t", split=split)
    ref: dict = {}
    _run(t, ops, ref)
    assert list(t.range()) == sorted(ref.items())
    for lo, hi in ((0, 50), (100, 300), (299, 301)):
        assert list(t.range(("k", lo), ("k", hi))) == sorted(i for i in ref.items() if ("k", lo) <= i[0] <= ("k", hi))


@pytest.mark.parametrize("split", ["simple", "shortest", "prefix"])
def test_seeded_run_on_a_file(tmp_path, split):
    rnd = random.Random(5)
    store = PageStore(tmp_path / "t.bpt", page_size=256, buffer_pages=3)
    t = BPlusTree(store, "t", split=split)
    ops = [(rnd.choice("iiiddDR"), rnd.randrange(2000), rnd.randrange(60)) for _ in range(3000)]
    ref: dict = {}
    _run(t, ops, ref)
    store.close()
    t = BPlusTree(PageStore(tmp_path / "t.bpt", page_size=256), "t", split=split)
    assert t.check() == len(ref) and list(t.range()) == sorted(ref.items())


def test_bulk_load_fills_pages_and_is_smaller_than_inserting():
    items = [(("s%05d" % i, "p", "o%d" % (i % 7)), b"") for i in range(5000)]
    one = BPlusTree(PageStore(None, page_size=1024), "t", split="shortest")
    for k, v in random.Random(1).sample(items, len(items)):
        one.insert(k, v)
    bulk = BPlusTree(PageStore(None, page_size=1024), "t")
    bulk.bulk_load(items)
    assert one.check() == bulk.check() == 5000
    assert bulk.store.pages() * 1.3 < one.store.pages()
    with pytest.raises(ArchiveError):
        bulk.bulk_load(items)


def test_prefix_separators_are_shorter():
    items = [(("subject-%06d-with-a-long-common-part" % i,), b"") for i in range(3000)]
    sizes = {}
    for split in ("simple", "prefix"):
        t = BPlusTree(PageStore(None, page_size=512), "t", split=split)
        for k, v in items:
            t.insert(k, v)
        root = t.store.get(t.root)
        seps = [e[0] for e in root.entries[:-1]]        # the last one is the largest key inserted
        sizes[split] = sum(len(s[0]) for s in seps) / len(seps)
    assert sizes["prefix"] < sizes["simple"]


def test_floor_last_update_and_errors():
    t = BPlusTree(PageStore(None, page_size=256), "t")
    for i in range(0, 200, 2):
        t.insert((i,), b"%d" % i)
    assert t.floor((51,)) == ((50,), b"50") and t.floor((-1,)) is None and t.last() == ((198,), b"198")
    t.update((50,), b"fifty")
    assert t.get((50,)) == b"fifty"
    with pytest.raises(KeyStateError):
        t.delete((51,))
    with pytest.raises(EntryTooLargeError):
        t.insert((1,), b"x" * 300)
    with pytest.raises(KeyStateError):
        t.insert_range([((10,), b"")])
