"""The MVBT against brute force (a plain list of lifespans): random interleavings of
inserts, deletes, range deletes and range inserts, every timeslice, key-time range and
history query compared, invariants checked after every change."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive import MVBT
from archive.errors import ArchiveError, EntryTooLargeError, KeyStateError, KeyTypeError, VersionError

from .brute import Versions, run_mvbt

LONG_STEPS = int(os.environ.get("ONYX_ARCHIVE_LONG_STEPS", "100000"))


def test_errors_say_what_is_wrong():
    t = MVBT(page_size=1024)
    t.insert(("S", 1), 5, b"a")
    with pytest.raises(VersionError, match="does not follow"):
        t.insert(("S", 2), 5, b"b")
    with pytest.raises(KeyStateError, match="is live"):
        t.insert(("S", 1), 6, b"c")
    with pytest.raises(KeyStateError, match="not live"):
        t.delete(("S", 9), 7)
    with pytest.raises(KeyTypeError):
        t.insert(["S", 3], 8, b"d")
    with pytest.raises(KeyTypeError):
        t.insert((1, 3), 8, b"d")                   # a number where strings were
    with pytest.raises(EntryTooLargeError):
        t.insert(("S", 4), 9, b"x" * 4000)
    with pytest.raises(ArchiveError):
        list(t.range(("S",), ("T",), 5, 4))
    assert isinstance(VersionError("x"), ArchiveError) and isinstance(ArchiveError("x"), ValueError)


def test_public_api_contract():
    t = MVBT(path=None, page_size=4096, d=0.25, e=0.5)
    t.insert(("S", 17), 1, b"x")
    t.insert(("S", 18), 2, b"y")
    t.delete(("S", 17), 3)
    assert list(t.timeslice(2)) == [(("S", 17), b"x"), (("S", 18), b"y")]
    assert sorted(t.range(("S", 0), ("S", 99), 0, 10)) == [(("S", 17), b"x", 1, 3), (("S", 18), b"y", 2, None)]
    assert sorted(t.range(("S", 0), ("S", 99), 3, 3)) == [(("S", 18), b"y", 2, None)]
    assert t.history(("S", 17)) == [(1, 3, b"x")]
    s = t.stats()
    assert {"pages", "page_reads", "page_writes", "live", "height"} <= set(s) and s["live"] == 1


def test_ends_are_resolved_for_past_windows():
    t = MVBT(page_size=1024)
    for i in range(300):
        t.insert(("k", i), i + 1, b"v")
    for i in range(0, 300, 2):
        t.delete(("k", i), 400 + i)
    got = {k: e for k, _, _, e in t.range(("k", 0), ("k", 299), 0, 100)}
    assert got == {("k", i): (400 + i if i % 2 == 0 else None) for i in range(100)}


def test_reopens_from_its_file(tmp_path):
    path = tmp_path / "t.mvbt"
    t = MVBT(path, page_size=1024, buffer_pages=4)
    ref = Versions()
    for i in range(600):
        key = ("k", (i * 37) % 200)
        if key in ref.live:
            t.delete(key, i + 1)
            ref.delete(key, i + 1)
        else:
            t.insert(key, i + 1, b"%d" % i)
            ref.insert(key, i + 1, b"%d" % i)
    t.close()
    t = MVBT(path, page_size=1024)
    assert list(t.timeslice(300)) == ref.timeslice(300)
    assert t.history(("k", 37)) == ref.history(("k", 37))
    t.insert(("k", 999), 1000, b"later")
    with pytest.raises(ArchiveError):
        MVBT(path, page_size=1024, d=0.2)


OPS = st.lists(st.tuples(st.sampled_from("iiiddDR"), st.integers(0, 60), st.integers(0, 12)), min_size=30, max_size=150)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, page=st.sampled_from([512, 1024]), split=st.sampled_from(["simple", "shortest", "prefix"]))
def test_random_changes_match_brute_force(ops, page, split):
    t = MVBT(page_size=page, split=split, check=True, buffer_pages=3)
    ref = Versions()
    v = 0
    for op, a, n in ops:
        v += 1
        key = ("k", a)
        if op == "i" and key not in ref.live:
            t.insert(key, v, b"%d" % v)
            ref.insert(key, v, b"%d" % v)
        elif op == "d" and key in ref.live:
            t.delete(key, v)
            ref.delete(key, v)
        elif op == "D":
            t.delete_range(key, ("k", a + n), v)
            ref.delete_range(key, ("k", a + n), v)
        elif op == "R":
            keys = [("k", x) for x in range(a, a + n + 1) if ("k", x) not in ref.live]
            if keys:
                t.insert_range([(k, b"r") for k in keys], v)
                for k in keys:
                    ref.insert(k, v, b"r")
        t.check()
        for at in (v, max(0, v - 7)):
            assert list(t.timeslice(at)) == ref.timeslice(at)
    for lo in range(0, 60, 13):
        for vlo, vhi in ((0, v), (v // 3, v // 2), (v, v)):
            assert sorted(t.range(("k", lo), ("k", lo + 20), vlo, vhi)) == ref.range(("k", lo), ("k", lo + 20), vlo, vhi)
        assert t.history(("k", lo)) == ref.history(("k", lo))


@pytest.mark.parametrize("split", ["simple", "shortest", "prefix"])
def test_seeded_run_with_every_change_kind(split):
    counts = run_mvbt(7, 3000, split=split)
    assert min(counts[k] for k in ("insert", "delete", "delete_range", "insert_range", "query")) > 0


def test_seeded_run_on_a_file_with_a_tiny_buffer(tmp_path):
    run_mvbt(3, 2000, path=tmp_path / "t.mvbt", buffer_pages=2)


def test_long_run_matches_brute_force():
    """The long run: LONG_STEPS (100k by default) random changes on 4 KB pages, path
    invariants after every change, queries against brute force every 500 changes."""
    counts = run_mvbt(2026, LONG_STEPS, page_size=4096, nkeys=5000, query_every=500, full_check_every=0)
    assert counts["insert"] + counts["delete"] + counts["delete_range"] + counts["insert_range"] > LONG_STEPS * 0.9


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_longer_run_on_small_pages_with_full_checks():
    run_mvbt(11, 200_000, page_size=1024, nkeys=3000, query_every=400, full_check_every=25_000)
